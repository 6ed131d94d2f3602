"""`python -m tuner` and the `repkv-tune` command.

Ctrl-C is taken over on the first line, before anything heavy is imported: whenever it comes,
the command ends with one line and status 130, never a KeyboardInterrupt traceback
(`tuner.interrupt`). Output piped to a reader that stops early (`| head`) ends the command
quietly with status 1. The commands that read results run on the base install; tuning says in
one line to install the `tuner` extra when it is missing (`tuner.cli.extra`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from tuner.interrupt import quits_at_once


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (`argv`, default the process's own). Called without `argv` it is the
    process's entry point, and the Ctrl-C handler stays through the interpreter's exit;
    with `argv` (a test, a script) the caller's handler is restored when it returns."""
    with quits_at_once(for_good=argv is None):
        from tuner.cli.main import main as cli_main

        try:
            rc = cli_main(argv)
            sys.stdout.flush()  # a reader gone (`| head`) shows here, not at the interpreter's exit
            return rc
        except BrokenPipeError:
            # the output's reader stopped reading: end quietly, and let nothing flush to it again
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            except (OSError, ValueError):
                pass
            return 1


if __name__ == "__main__":
    raise SystemExit(main())
