"""Shared fixtures. Tests marked `gpu` run only where CuPy sees a CUDA device; `postgres_url`
is a throwaway PostgreSQL server (or REPKV_TEST_POSTGRES_URL), for the fleet and docker tests."""

from __future__ import annotations

import functools
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@functools.cache
def gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


@pytest.fixture(autouse=True, scope="session")
def _scratch_user_results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No test writes into the user's own results directory (which the tuner, the op and the
    service read by default): REPKV_RESULTS_DIR points at a scratch directory for the whole run,
    subprocesses included. A test may still set its own."""
    saved = os.environ.get("REPKV_RESULTS_DIR")
    os.environ["REPKV_RESULTS_DIR"] = str(tmp_path_factory.mktemp("user-results"))
    yield
    if saved is None:
        os.environ.pop("REPKV_RESULTS_DIR", None)
    else:
        os.environ["REPKV_RESULTS_DIR"] = saved


# Under pytest-xdist (./test.sh runs `-n auto --dist loadgroup`), the tests of each of these
# groups run in one worker: the GPU tests one at a time on the one GPU (their timings would
# disturb each other), the packaging tests beside the one wheel their session builds, the
# browser tests with one Chromium. (By path: xdist 3.8's xdist_group marks do not group under
# pytest 9, whose node ids it can no longer rename.)
ONE_WORKER = {
    "tests/gpu/": "gpu",
    "tests/packaging/": "packaging",
    "tests/service/test_dashboards_browser.py": "browser",
}


def one_worker_group(nodeid: str) -> str | None:
    return next((group for prefix, group in ONE_WORKER.items() if nodeid.startswith(prefix)), None)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    # `-n N` without `--dist` distributes as ./test.sh does: xdist would pick `load`, which
    # scatters the GPU tests over the workers, their >2^31-element cases out of memory beside
    # each other and their timings disturbed. (Runs before xdist's own hook: a conftest's
    # tryfirst hook is called before a plugin's registered earlier.) `--dist load` still wins.
    if getattr(config.option, "numprocesses", None) and config.option.dist == "no":
        config.option.dist = "loadgroup"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    if config.getvalue("dist") != "loadgroup":
        return None  # xdist's own scheduler for the other modes
    from xdist.scheduler import LoadGroupScheduling

    class OneWorkerGroups(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return one_worker_group(nodeid) or super()._split_scope(nodeid)

    return OneWorkerGroups(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The tests of minutes go first, so that the workers run them beside the short ones rather
    # than alone at the end (the order is the same in every worker, as xdist needs).
    items.sort(key=lambda item: not (item.get_closest_marker("long") or one_worker_group(item.nodeid)))
    if any(item.get_closest_marker("gpu") for item in items) and not gpu_available():
        # Without a GPU each module's GPU tests are reported as one skip (its first, naming how
        # many), the rest deselected: thousands of skipped cases cost the one worker of the gpu
        # group half a minute for nothing.
        gpu_items: dict[str, list[pytest.Item]] = {}
        for item in items:
            if item.get_closest_marker("gpu"):
                gpu_items.setdefault(item.nodeid.split("::")[0], []).append(item)
        dropped = []
        for module, found in gpu_items.items():
            count = f"{len(found)} GPU test{'s' * (len(found) > 1)}"
            reason = f"no CUDA GPU visible to CuPy ({count} of {module})"
            found[0].add_marker(pytest.mark.skip(reason=reason))
            dropped += found[1:]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            gone = set(map(id, dropped))
            items[:] = [item for item in items if id(item) not in gone]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    given = os.environ.get("REPKV_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install '.[postgres]')")
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not bins:
        pytest.skip(
            "PostgreSQL server binaries not found under /usr/lib/postgresql (apt-get install postgresql)"
        )
    bindir = Path(bins[-1]).parent
    as_user: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser: cannot start PostgreSQL as the postgres user")
        as_user = ["runuser", "-u", "postgres", "--"]
    # One server per pytest-xdist worker (the session is the worker's), each in its own directory.
    base = Path(tempfile.mkdtemp(prefix="repkv-pg-"))
    if as_user:
        shutil.chown(base, "postgres")
    data = base / "data"

    def run(*cmd: str) -> None:
        subprocess.run([*as_user, *cmd], check=True, capture_output=True, timeout=120, cwd=base)

    try:
        run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        # a port can be taken between choosing and binding it (another worker's server): try anew
        for attempt in range(3):
            port = _free_port()
            options = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off"
            log = base / f"log{attempt}"
            try:
                run(str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w", "start")
                break
            except subprocess.CalledProcessError:
                if attempt == 2 or "already in use" not in log.read_text(errors="replace"):
                    raise
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        shutil.rmtree(base, ignore_errors=True)
        pytest.skip(f"could not start PostgreSQL: {getattr(exc, 'stderr', b'')!r}")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(base, ignore_errors=True)
