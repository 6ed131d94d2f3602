"""`python -m tuner` and the `repkv-tune` command.

Ctrl-C is taken over on the first line, before anything heavy is imported: whenever it comes,
the command ends with one line and status 130, never a KeyboardInterrupt traceback
(`tuner.interrupt`). The commands that read results run on the base install; tuning says in
one line to install the `tuner` extra when it is missing (`tuner.cli.extra`).
"""

from __future__ import annotations

from collections.abc import Sequence

from tuner.interrupt import quits_at_once


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (`argv`, default the process's own). Called without `argv` it is the
    process's entry point, and the Ctrl-C handler stays through the interpreter's exit;
    with `argv` (a test, a script) the caller's handler is restored when it returns."""
    with quits_at_once(for_good=argv is None):
        from tuner.cli.main import main as cli_main

        return cli_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
