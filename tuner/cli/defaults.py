"""The defaults the command line offers, importable without the tuner's dependencies (the
`tuner` extra): `python -m tuner --help` and the commands that only read results run on a
service-only install, where neither Optuna nor SciPy is installed."""

from __future__ import annotations

AHEAD = 8  # trials asked at once (`tuner.study.ask_ahead`); the GPU runner compiles in 8 threads
HEARTBEAT_S = 30.0  # a running trial's sign of life (Optuna's heartbeat, or a lease)
WARM_START_SIZE = 4  # configurations queued ahead of the sampler (`tuner.study.warm_start`)
DEFAULT_SAMPLERS = ("tpe", "random", "tpe+warm")  # what `replay-eval` compares
