"""The `tuner` extra: what tuning needs beyond the base install.

The base install (`pip install repkv-tune`, the service image) reads and serves results; the
commands that only read them (`best`, `export`, `variants`, `merge`, `--help`) run there.
Tuning (`tune`, `replay-eval`) needs Optuna and the rest of `pip install 'repkv-tune[tuner]'`;
without it, it says so in one line.
"""

from __future__ import annotations

import importlib

TUNER_MODULES = ("optuna", "sqlalchemy", "rich", "tqdm")  # what tuning cannot start without
INSTALL_HINT = "pip install 'repkv-tune[tuner]'"
TUNING_COMMANDS = ("tune", "replay-eval")


def missing_modules() -> list[str]:
    """The tuner's modules that do not import here."""
    missing = []
    for name in TUNER_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def unmet(command: str, prog: str = "python -m tuner") -> str | None:
    """Why `command` cannot run here (one line naming what to install), or None; `prog` is the
    command line's name (`tuner.cli.parser.program_name`)."""
    if command not in TUNING_COMMANDS:
        return None
    missing = missing_modules()
    if not missing:
        return None
    return (
        f"{prog} {command} needs the tuner's dependencies, and {', '.join(missing)} "
        f"{'is' if len(missing) == 1 else 'are'} not installed: {INSTALL_HINT}"
    )


class NoBar:
    """What `tuner.cli.report.CounterBar` uses of a tqdm bar, drawing nothing: `check` needs NVRTC,
    not the tuner extra, and runs without tqdm."""

    def __init__(self, total: int | None = None, **_: object) -> None:
        self.total, self.n = total, 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def close(self) -> None:
        return None
