"""`python -m tuner` and the `repkv-tune` command: the CLI, once the tuner's dependencies
(the `tuner` extra) are known to be installed."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence

# What `pip install 'repkv-tune[tuner]'` brings and the CLI cannot start without (the service
# and the results store need none of it).
TUNER_MODULES = ("optuna", "sqlalchemy", "rich", "tqdm")
INSTALL_HINT = "pip install 'repkv-tune[tuner]'"


def missing_modules() -> list[str]:
    return [name for name in TUNER_MODULES if importlib.util.find_spec(name) is None]


def main(argv: Sequence[str] | None = None) -> int:
    missing = missing_modules()
    if missing:
        print(
            f"python -m tuner: the tuner's dependencies are not installed (no {', '.join(missing)}): "
            f"{INSTALL_HINT}",
            file=sys.stderr,
        )
        return 2
    from tuner.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
