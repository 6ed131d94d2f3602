"""The wheel as a stranger gets it: built from the sources, installed into fresh virtual
environments away from the checkout (one without extras, as a service host would, and one with
the `tuner` extra, conftest's `tuner_install`), and run from a directory outside the checkout.

It installs the dependencies from the package index (with uv where the dev extra installed it:
seconds once its cache holds them).
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from wheel_install import REPO, Install, fresh_install, serving

SHAPE = "B=8,T=1024,NH=32,NH_KV=8,HD=128"
HINT = "pip install 'repkv-tune[tuner]'"
PACKAGES = (
    "variants",
    "results",
    "tuner",
    "service",
    "service.api",
    "service.dashboards",
    "tuner.runners.gpu",
)

pytestmark = [pytest.mark.packaging, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory, built_wheel: Path) -> Install:
    return fresh_install(tmp_path_factory.mktemp("packaging"), built_wheel)


@pytest.fixture
def served(install: Install) -> Iterator[str]:
    with serving(install) as url:
        yield url


def test_no_benchmark_output_ships_in_the_wheel(built_wheel: Path) -> None:
    """The runs behind docs/ (logs, tables, parquet) stay in docs/runs, out of the package: the
    only data the wheel carries is the bundled store's parquet under results/data and the NVRTC
    reports `check` seeds its cache with (compile results, no timing)."""
    names = zipfile.ZipFile(built_wheel).namelist()
    files = [n for n in names if ".dist-info/" not in n]
    assert not [n for n in files if n.endswith((".log", ".txt", ".md", ".json"))]
    assert not [n for n in names if n.startswith(("results/benchmarks/", "docs/", "scripts/"))]
    reports = "variants/data/nvrtc-reports.parquet"
    assert reports in files
    assert all(n.startswith("results/data/") or n == reports for n in files if n.endswith(".parquet"))


def test_the_wheel_holds_every_package_and_the_data_they_read(install: Install) -> None:
    names = set(zipfile.ZipFile(install.wheel).namelist())
    for module in ("service/api/app.py", "service/api/routes/best.py", "service/dashboards/__init__.py"):
        assert module in names
    assert {
        "repkv_tune/ops.py",
        "tuner/runners/gpu/worker.py",
        "variants/common.cuh",
        "variants/split.cu",
        "variants/rope_repkv_forward/rope.cuh",
        "variants/repkv_forward/vec.cu",
    } <= names
    bundled = {n for n in names if n.startswith("results/data/") and n.endswith(".parquet")}
    assert len(bundled) == len(list((REPO / "results" / "data").rglob("*.parquet"))) > 0
    assert not any(n.startswith(("tests/", "scripts/", "docker/")) for n in names)
    dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    entry_points = zipfile.ZipFile(install.wheel).read(f"{dist_info}/entry_points.txt").decode()
    assert "repkv-tune = tuner.__main__:main" in entry_points
    assert "repkv-serve = service.cli:main" in entry_points
    metadata = zipfile.ZipFile(install.wheel).read(f"{dist_info}/METADATA").decode()
    assert "License-Expression: MIT" in metadata and f"{dist_info}/licenses/LICENSE" in names
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    for name in ("optuna", "scipy"):
        (line,) = [r for r in requires if r.split()[1].startswith(name)]
        assert 'extra == "tuner"' in line  # never a dependency of the service
    print(f"{install.wheel.name}: {install.wheel.stat().st_size / 1e6:.2f} MB")


def test_without_extras_the_service_serves_the_bundled_results(install: Install, request) -> None:
    install.pip_install(str(install.wheel))
    url = request.getfixturevalue("served")  # started once the wheel is in
    origins = json.loads(
        install.py(
            "import importlib, json; "
            f"print(json.dumps({{m: importlib.import_module(m).__file__ for m in {list(PACKAGES)!r}}}))"
        )
    )
    for module, path in origins.items():
        assert Path(path).resolve().is_relative_to(install.venv.resolve()), (module, path)
        assert not Path(path).resolve().is_relative_to(REPO.resolve()), (module, path)
    code = "import json; from results.store import read_dirs as r; print(json.dumps([str(d) for d in r()]))"
    user, bundled = map(Path, json.loads(install.py(code)))
    assert user == Path(install.env["XDG_DATA_HOME"]) / "repkv-tune" / "results"
    assert bundled.resolve().is_relative_to(install.venv.resolve()) and list(bundled.rglob("*.parquet"))
    for module in ("optuna", "scipy"):
        assert install.py(f"import importlib.util; print(importlib.util.find_spec({module!r}))") == "None"

    best = httpx.get(f"{url}/best", params={"B": 8, "T": 1024, "gpu": "h200"}, timeout=10)
    assert best.status_code == 200, best.text
    answer = best.json()["answers"][0]
    assert answer["match"] == "exact" and answer["kernel"]["name_expression"]
    assert httpx.get(f"{url}/dashboards", timeout=30).status_code == 200
    assert httpx.get(f"{url}/static/plotly.min.js", timeout=30).status_code == 200

    assert install.run(install.script("repkv-serve"), "--help").returncode == 0
    # what only reads results runs without the tuner extra; tuning says in one line what to install
    for argv in ([install.python, "-m", "tuner", "--help"], [install.script("repkv-tune"), "--help"]):
        out = install.run(*argv)
        assert out.returncode == 0 and "replay-eval" in out.stdout, out.stderr
    best = install.run(install.script("repkv-tune"), "best", "--gpu", "h200")
    assert best.returncode == 0 and "Winners in" in best.stdout, best.stdout + best.stderr
    tune = install.run(
        install.python, "-m", "tuner", "--replay", "bundled", "--shape", SHAPE, "--dtype", "bf16"
    )
    assert tune.returncode == 2 and tune.stdout == "", tune
    assert tune.stderr.count("\n") == 1 and HINT in tune.stderr, tune.stderr


def test_with_the_tuner_extra_the_tuner_replays_the_bundled_store(
    tmp_path: Path, tuner_install: Install
) -> None:
    install = tuner_install.elsewhere(tmp_path)
    for argv in ([install.python, "-m", "tuner", "--help"], [install.script("repkv-tune"), "--help"]):
        out = install.run(*argv)
        assert out.returncode == 0 and "replay-eval" in out.stdout, out.stderr

    bundled = install.py("from results.store import bundled_results_dir; print(bundled_results_dir())")
    assert Path(bundled).resolve().is_relative_to(install.venv.resolve())
    out_dir = install.work / "replayed"
    argv = ["--replay", bundled, "--shape", SHAPE, "--dtype", "bf16", "--trials", "5", "--seed", "0"]
    out = install.run(install.python, "-m", "tuner", *argv, "--results", out_dir, "--no-progress")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Winners on h200" in out.stdout
    rows = json.loads(
        install.py(
            "import json; from results.store import load_results; "
            f"f = load_results({str(out_dir)!r})[0]; "
            "print(json.dumps([len(f), sorted(set(f.gpu)), int(f.config_key.nunique())]))"
        )
    )
    assert rows == [5, ["h200"], 5]
    assert list((out_dir / "h200").glob("*.parquet"))
    assert not Path(bundled, "optuna.db").exists()  # nothing was written into the package

    best = install.run(install.script("repkv-tune"), "best", "--gpu", "h200")
    assert best.returncode == 0 and "Winners in" in best.stdout, best.stdout + best.stderr
