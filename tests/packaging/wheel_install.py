"""The wheel as a stranger gets it, for the packaging tests: built from the checkout's sources
(`build_wheel`, once per session through conftest's `built_wheel`), then installed into a fresh
virtual environment away from the checkout (one without extras, one with the `tuner` extra that
conftest's `tuner_install` shares between the modules), and run from a directory outside it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]


def _uv() -> str | None:
    try:
        import uv
    except ImportError:
        return None
    return uv.find_uv_bin()


UV = _uv()


@dataclass
class Install:
    wheel: Path
    venv: Path
    work: Path  # the working directory of every command: outside the checkout
    env: dict[str, str]

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def script(self, name: str) -> Path:
        return self.venv / "bin" / name

    def run(self, *argv: str | Path, timeout: float = 300) -> subprocess.CompletedProcess:
        command = [str(a) for a in argv]
        return subprocess.run(
            command, cwd=self.work, env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def py(self, code: str) -> str:
        out = self.run(self.python, "-c", code)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    def elsewhere(self, root: Path) -> Install:
        """The same environment with an empty working directory and user data directory of
        its own under `root`: a test in it sees nothing another test wrote."""
        (root / "work").mkdir(parents=True)
        return replace(self, work=root / "work", env={**self.env, "XDG_DATA_HOME": str(root / "data")})

    def pip_install(self, requirement: str) -> None:
        """Install requirement (the wheel, with or without extras) and what it depends on from
        the package index, as `pip install` does: with uv's pip interface where the dev extra
        put it beside the tests (about ten times faster, its downloads in parallel and cached),
        with pip otherwise. Neither byte-compiles: Python compiles what a command imports."""
        if UV is not None:
            argv = [UV, "pip", "install", "-q", "--python", self.python, requirement]
        else:
            argv = [self.python, "-m", "pip", "install", "-q", "--no-compile", requirement]
        out = self.run(*argv, timeout=1200)
        assert out.returncode == 0, out.stdout + out.stderr


def _sources(dest: Path) -> Path:
    """The checkout's files (tracked, and untracked but not ignored) without build leftovers:
    setuptools writes build/ and *.egg-info beside the sources it builds."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
    )
    if listed.returncode == 0:
        for name in filter(None, listed.stdout.decode().split("\0")):
            if (REPO / name).is_file():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / name, dest / name)
    else:  # not a git checkout
        ignore = shutil.ignore_patterns(".*", "__pycache__", "build", "dist", "*.egg-info")
        shutil.copytree(REPO, dest, ignore=ignore, dirs_exist_ok=True)
    return dest


def build_wheel(root: Path) -> Path:
    """The wheel built under `root` from the checkout's sources (copied out first, so the build
    leaves nothing behind in the checkout)."""
    assert not root.resolve().is_relative_to(REPO.resolve())
    src = _sources(root / "src")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(src), "-w", str(root / "dist")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (root / "dist").glob("repkv_tune-*.whl")
    return wheel


def fresh_install(root: Path, wheel: Path) -> Install:
    """A fresh virtual environment under `root` (nothing installed yet), an empty working
    directory and an environment without the caller's Python or repkv settings, whose user data
    directory is under `root` too."""
    venv = [sys.executable, "-m", "venv", "--without-pip", str(root / "venv")]
    subprocess.run(venv, check=True, timeout=300)
    if UV is None:  # pip installs into the environment: it needs its own pip
        subprocess.run([root / "venv" / "bin" / "python", "-m", "ensurepip", "-q"], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "REPKV_", "VIRTUAL_ENV"))}
    env["XDG_DATA_HOME"] = str(root / "data")  # the user data directory, not the real one
    env["PATH"] = f"{root / 'venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"  # `python` is the venv's
    work = root / "work"
    work.mkdir()
    return Install(wheel, root / "venv", work, env)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(install: Install) -> Iterator[str]:
    """`python -m service` of the install on a free port, once /readyz answers: its base URL."""
    port = free_port()
    argv = [str(install.python), "-m", "service", "--port", str(port), "--log-level", "warning"]
    proc = subprocess.Popen(
        argv, cwd=install.work, env=install.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                out = proc.stdout.read().decode() if proc.stdout else ""
                pytest.fail(f"python -m service did not get ready:\n{out}")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
