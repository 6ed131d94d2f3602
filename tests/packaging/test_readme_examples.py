"""The README's shell examples, run as written from the installed wheel in an empty directory.

Every command of every ```bash block of the README runs, in the README's order, in one empty
working directory, with the wheel and its `tuner` extra installed into a fresh virtual
environment (its `bin` first on PATH, so `python` is the install's), unless SKIPPED names it with
the reason. Examples that talk to the service (`http://127.0.0.1:8000`) are pointed at a service
of the install that this test starts on a free port. The README's Python blocks need a GPU:
`tests/gpu/test_gpu_readme.py` runs the CuPy one.
"""

from __future__ import annotations

import re
import subprocess
from contextlib import ExitStack

import pytest
from wheel_install import REPO, Install, serving

README = REPO / "README.md"
SERVICE = "http://127.0.0.1:8000"

CHECKOUT = "needs the checkout: run from its root, it installs the project into ./.venv"
INSTALLS = "installs the project from the checkout; the test installs the built wheel itself"
GPU = "needs an NVIDIA GPU and CuPy"
SKIPPED = {
    "./run.sh": CHECKOUT,
    "./test.sh": CHECKOUT + " and runs every test",
    "pip install '.[tuner,cuda13]'": INSTALLS,
    "pip install '.[torch,cuda13]'": INSTALLS,
    "pip install .": INSTALLS,
    "pip install -e '.[dev]'": INSTALLS,
    "pip wheel --no-deps . -w dist": INSTALLS,
    "pip install 'dist/repkv_tune-0.1.0-py3-none-any.whl[tuner]'": INSTALLS,
    "python -m service --port 8000 &": "the test starts the service itself, on a free port",
    "python -m tuner": GPU,
    "python -m tuner --model llama3-8b --batch 1,8 --seq 1024,4096 --dtype bf16 --trials 60": GPU,
    "python -m tuner --shape B=8,T=1024,NH=32,NH_KV=8,HD=128 --sampler grid": GPU,
    "python -m tuner --family tile,flat --l2 fed --shape B=1,T=512,NH=32,NH_KV=8,HD=64 --dtype bf16": GPU,
    "python -m tuner --op rope_repkv_forward --model llama3-8b --dtype bf16": GPU,
    "python -m tuner check --arch sm_90": "needs the nvrtc extra (NVRTC and the CUDA headers)",
    "python -m tuner --devices all --model llama3-8b --dtype bf16": GPU + " (one process per GPU)",
    "python -m tuner --devices all --storage postgresql://repkv:PASSWORD@db-host:5432/optuna --study llama3"
    " --model llama3-8b --dtype bf16": GPU + ", and a PostgreSQL server",
    "docker compose -f docker/compose.yaml up --build": "needs a Docker engine, GPUs and the checkout",
}


def bash_commands(text: str) -> list[str]:
    """The commands of the ```bash blocks, in order: continuation lines joined, blank and
    comment-only lines left out."""
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                commands.append(line.strip())
    return commands


def without_comment(command: str) -> str:
    return re.sub(r"\s+#\s.*$", "", command).strip()


COMMANDS = bash_commands(README.read_text())


def test_the_readme_has_examples_to_run_and_each_skip_names_one_of_them() -> None:
    listed = {without_comment(c) for c in COMMANDS}
    assert not set(SKIPPED) - listed, "SKIPPED names commands the README no longer has"
    assert len(listed - set(SKIPPED)) >= 8


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory, tuner_install: Install) -> Install:
    return tuner_install.elsewhere(tmp_path_factory.mktemp("readme"))


@pytest.mark.packaging
@pytest.mark.timeout(1500)
def test_the_readme_examples_run_as_written(install: Install) -> None:
    """All in one test, in the README's order (a later example may read what an earlier one
    wrote), every failure reported."""
    failures, skipped = [], []
    with ExitStack() as stack:
        service = None
        for command in COMMANDS:
            reason = SKIPPED.get(without_comment(command))
            if reason:
                skipped.append(f"{command}: {reason}")
                continue
            if SERVICE in command:
                service = service or stack.enter_context(serving(install))
                command = command.replace(SERVICE, service)
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=install.work,
                env=install.env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if done.returncode != 0 or "Traceback" in done.stderr:
                output = done.stdout[-2000:] + done.stderr[-2000:]
                failures.append(f"$ {command}\nexit {done.returncode}\n{output}")
    print("skipped:\n" + "\n".join(skipped))
    assert not failures, "\n\n".join(failures)
