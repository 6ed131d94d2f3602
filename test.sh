#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need, then runs pytest on
# every core (pytest-xdist; -n 0 runs it in one process).
# Debian packages: PostgreSQL (fleet tests), Chromium (dashboard tests) and g++ (header test). Python packages go
# into ./.venv, installed again only when pyproject.toml or this script changes. Extra arguments go to pytest
# (e.g. ./test.sh -m gpu on a GPU host).
set -euo pipefail
cd "$(dirname "$0")"

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v g++ >/dev/null 2>&1 || need+=(g++)  # nvcc's host compiler (the llm.c header test)
compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || need+=(postgresql)
if ((${#need[@]})); then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The PyTorch operators' CPU tests and the Triton peer (interpreter mode) need torch and
# triton: the CPU build of torch (2.13.0 is the one this CI's machines carry), any triton.
torch=("torch==2.13.0" "triton>=3.0")
# The CUDA toolchain the shipped NVRTC reports were made with (variants/data): another
# one is still checked, by compiling every kernel afresh (over 20 minutes on two cores).
toolchain=(nvidia-cuda-nvrtc==13.5.37 nvidia-cuda-runtime==13.5.37 nvidia-cuda-crt==13.5.37
    nvidia-cuda-nvcc==13.5.37 nvidia-nvvm==13.5.37 nvidia-cuda-cccl==13.3.5.0.6)
stamp=.venv/.test-sh-installed
wanted="$(cat pyproject.toml "$0" | sha256sum)"
[ -x .venv/bin/python ] || python3 -m venv .venv
present="import importlib.util as u, sys; sys.exit(None in map(u.find_spec, ('xdist', 'optuna', 'torch', 'triton')))"
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ] || ! .venv/bin/python -c "$present"; then
    rm -f "$stamp"
    .venv/bin/python -m pip install -q --upgrade pip
    # --no-compile: byte-compiling every installed module (torch, scipy, ...) took over half of
    # the install; Python compiles what the tests import as they import it, once (see below)
    .venv/bin/python -m pip install -q --no-compile -e ".[dev]"
    .venv/bin/python -m pip install -q --no-compile "${torch[@]}" "${toolchain[@]}"
    echo "$wanted" >"$stamp"
fi
# The tests start hundreds of Python processes: each imports from bytecode cached by the first,
# even where the environment asks Python not to write it.
unset PYTHONDONTWRITEBYTECODE
# loadgroup: the tests of a group (tests/conftest.py, ONE_WORKER) run in one worker; `-n` alone means the same there.
exec .venv/bin/python -m pytest -n auto --dist loadgroup "$@"
