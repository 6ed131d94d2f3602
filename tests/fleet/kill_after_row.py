"""`python kill_after_row.py N TUNER-ARGS...`: a tuner that SIGKILLs itself right after its Nth
row reaches the disk, before the study hears of the trial (the worst moment to die)."""

from __future__ import annotations

import os
import signal
import sys

from tuner.run.rows import ResultsSink

after = int(sys.argv[1])
append = ResultsSink.append


def append_then_die(self: ResultsSink, row: dict) -> None:
    append(self, row)
    if len(self.rows) == after:
        os.kill(os.getpid(), signal.SIGKILL)


ResultsSink.append = append_then_die  # type: ignore[method-assign]

from tuner.cli.main import main  # noqa: E402

raise SystemExit(main(sys.argv[2:]))
