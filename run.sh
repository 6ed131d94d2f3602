#!/usr/bin/env bash
# The main job, from a fresh machine. On a host with an NVIDIA GPU: tune it
# (python -m tuner, arguments passed through; rows go to $REPKV_RESULTS_DIR, else
# ~/.local/share/repkv-tune/results). Without one: serve those results and the bundled ones
# (python -m service) on http://127.0.0.1:8000. Python packages go into ./.venv.
set -euo pipefail
cd "$(dirname "$0")"

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    cuda_major=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9]*\).*/\1/p' | head -1)
    extra="cuda13"
    [ "${cuda_major:-13}" -lt 13 ] && extra="cuda12"
    .venv/bin/python -m pip install -q -e ".[tuner,$extra]"
    exec .venv/bin/python -m tuner "$@"
fi
.venv/bin/python -m pip install -q -e .
exec .venv/bin/python -m service "$@"
