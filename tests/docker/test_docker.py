"""docker/ without a Docker engine: the Dockerfiles pass hadolint, compose.yaml is valid under
the Compose Specification's schema (vendored) and holds the fleet's rules, and the images'
entry commands run as they are, outside Docker, against a real PostgreSQL."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import jsonschema
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tuner"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import tuner_fakes as F
from live_service import free_port

from results.store import load_results

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
BIN = Path(sys.executable).parent


def _exe(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return found


def _compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def _instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(instruction, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (DOCKER / dockerfile).read_text())
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1] if " " in ln else "") for ln in lines]


def _final_stage(dockerfile: str) -> list[tuple[str, str]]:
    steps = _instructions(dockerfile)
    last = max(i for i, (op, _) in enumerate(steps) if op == "FROM")
    return steps[last:]


def _exec_form(dockerfile: str, op: str) -> list[str]:
    (args,) = [a for o, a in _final_stage(dockerfile) if o == op]
    if op == "HEALTHCHECK":
        args = args[args.index("CMD") + len("CMD") :]
    return json.loads(args)


@pytest.mark.parametrize("dockerfile", ["Dockerfile.tuner", "Dockerfile.service"])
def test_dockerfiles_pass_hadolint(dockerfile: str) -> None:
    proc = subprocess.run(
        [_exe("hadolint"), "--no-color", str(DOCKER / dockerfile)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_images_run_as_a_non_root_user_and_install_the_wheel() -> None:
    tuner, service = _final_stage("Dockerfile.tuner"), _final_stage("Dockerfile.service")
    assert re.fullmatch(r"nvidia/cuda:[\w.]+-runtime-[\w.]+", tuner[0][1])  # runtime, not devel
    for stage in (tuner, service):
        users = [a for o, a in stage if o == "USER"]
        assert users and users[-1] not in ("root", "0")
        assert any(o == "RUN" and "pip install" in a and ".whl" in a for o, a in stage)
    for dockerfile in ("Dockerfile.tuner", "Dockerfile.service"):
        assert any(o == "RUN" and "pip wheel" in a for o, a in _instructions(dockerfile))


def test_compose_is_valid_under_the_compose_specification() -> None:
    schema = json.loads((Path(__file__).with_name("compose-spec.json")).read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(_compose()), key=str)
    assert not errors, "\n".join(e.message for e in errors)
    bad = {**_compose(), "services": {"tuner": {"replica": 2}}}  # a misspelt key
    assert list(jsonschema.Draft7Validator(schema).iter_errors(bad))  # the schema does bite


def test_compose_never_shares_a_gpu_and_wires_postgres_and_the_results_volume() -> None:
    services = _compose()["services"]
    gpu_services = {
        name: s for name, s in services.items() if any(d.get("capabilities") == ["gpu"] for d in _devices(s))
    }
    assert gpu_services
    claimed: list[str] = []
    for name, s in gpu_services.items():
        assert s.get("deploy", {}).get("replicas", 1) == 1, f"{name}: replicas would share its GPUs"
        for device in _devices(s):
            if device.get("count") == "all":
                command = s["command"]
                assert command[command.index("--devices") + 1] == "all", f"{name}: a process per GPU"
                claimed.append("all")
            else:
                claimed += device["device_ids"]
    assert len(claimed) == len(set(claimed)) and ("all" not in claimed or len(claimed) == 1)
    postgres = services["postgres"]
    assert postgres["healthcheck"]["test"] and any(
        v.endswith(":/var/lib/postgresql/data") for v in postgres["volumes"]
    )
    for s in gpu_services.values():
        assert s["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert "postgresql://" in " ".join(s["command"]) and "results:/data" in s["volumes"]
    assert "results:/data:ro" in services["service"]["volumes"]


def _devices(service: dict) -> list[dict]:
    return service.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])


def test_the_service_image_command_serves_and_its_healthcheck_passes(tmp_path: Path) -> None:
    F.write_recording(tmp_path / "data", [F.SMALL], ["bf16"])
    port = str(free_port())
    command = _exec_form("Dockerfile.service", "CMD")
    env = {
        **os.environ,
        "REPKV_RESULTS_DIR": str(tmp_path / "data"),
        "REPKV_PORT": port,
        "REPKV_BUNDLED": "false",
    }
    proc = subprocess.Popen(
        [_exe(command[0]), *command[1:]], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read().decode()[-2000:]
            time.sleep(0.2)
        check = [a.replace("8000", port) for a in _exec_form("Dockerfile.service", "HEALTHCHECK")]
        assert check[0] == "python"
        assert subprocess.run([sys.executable, *check[1:]], timeout=30).returncode == 0
        # healthz says the process answers; /best waits for the store (503 while it loads)
        while httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code != 200:
            assert proc.poll() is None and time.monotonic() < deadline + 60, "the store never became ready"
            time.sleep(0.2)
        best = httpx.get(
            f"http://127.0.0.1:{port}/best", params={"B": 1, "T": 256, "NH": 14, "NH_KV": 2, "HD": 64}
        )
        assert best.status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_the_tuner_image_command_runs_a_fleet_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    """The compose file's tuner command, as the image's entrypoint runs it: its database is the
    test's server (same user, password and database name), its devices two replay workers."""
    psycopg = pytest.importorskip("psycopg")
    entrypoint = _exec_form("Dockerfile.tuner", "ENTRYPOINT")
    command = [
        os.path.expandvars(a).replace("${REPKV_POSTGRES_PASSWORD:-repkv}", "repkv")
        for a in _compose()["services"]["tuner"]["command"]
    ]
    storage = command[command.index("--storage") + 1]
    user, password, database = re.fullmatch(r"postgresql://(\w+):(\w+)@postgres:5432/(\w+)", storage).groups()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (user,)).fetchone():
            conn.execute(f"CREATE ROLE {user} LOGIN PASSWORD '{password}'")
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone():
            conn.execute(f"CREATE DATABASE {database} OWNER {user}")
    host_port = re.search(r"@([\d.]+:\d+)/", postgres_url).group(1)
    command[command.index("--storage") + 1] = storage.replace("postgres:5432", host_port)
    command[command.index("--devices") + 1] = "0,1"  # no GPU here: two replay workers
    recording = tmp_path / "recording"
    F.write_recording(recording, [F.SMALL], ["bf16"])
    extra = ["--replay", str(recording), "--shape", F.SMALL.key, "--dtype", "bf16", "--trials", "6"]
    extra += ["--results", str(tmp_path / "data")]  # a replay writes only where told (/data, here)
    env = {**os.environ, **_compose()["services"]["tuner"]["environment"]}
    proc = subprocess.run(
        [_exe(entrypoint[0]), *entrypoint[1:], *command, *extra, "--study", f"compose-{os.getpid()}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    frame, _ = load_results(tmp_path / "data")
    assert len(frame) == 6 and frame["config_key"].is_unique
