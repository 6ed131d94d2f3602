#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need, then runs pytest.
# Debian packages: PostgreSQL (fleet tests), Chromium (dashboard tests) and g++ (header test). Python packages go
# into ./.venv. Extra arguments go to pytest (e.g. ./test.sh -m gpu on a GPU host).
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

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev]"
# The PyTorch operators' CPU tests and the Triton peer (interpreter mode) need torch and
# triton: the CPU build of torch (2.13.0 is the one this CI's machines carry), any triton.
.venv/bin/python -m pip install -q "torch==2.13.0" "triton>=3.0"
exec .venv/bin/python -m pytest "$@"
