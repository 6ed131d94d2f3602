"""A family for tests only: kernels with planted faults (see faulty.cu)."""

from __future__ import annotations

from pathlib import Path

from variants.family import Family, Launch, Param

MODES = ("ok", "wrong", "hang", "crash", "launch", "compile")


class Faulty(Family):
    name = "faulty"
    doc = "test-only kernels with planted faults"
    params = (Param("mode", MODES, "which fault to plant"),)

    @property
    def template_path(self) -> Path:
        return Path(__file__).with_name("faulty.cu")

    def template_args(self, shape, dtype, p):
        return [dtype.ctype, str(MODES.index(p["mode"]))]

    def launch(self, shape, dtype, p, sm_count):
        return Launch(2 * sm_count, 1024)


FAULTY = Faulty()
