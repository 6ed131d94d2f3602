"""The PTX of one configuration, compiled offline with NVRTC (the test skips without NVRTC)."""

from __future__ import annotations

import pytest

from variants import FAMILIES, Config, DType, Shape


def kernel_ptx(config: Config, dtype: DType, shape: Shape) -> str:
    nvrtc = pytest.importorskip("variants.nvrtc")
    try:
        nvrtc.nvrtc_version()
    except nvrtc.NvrtcUnavailable as exc:  # pragma: no cover - CI installs the nvrtc extra
        pytest.skip(str(exc))
    family = FAMILIES[config.family]
    expression = family.name_expression(shape, dtype, config)
    (report,) = nvrtc.compile_expressions(family, [expression], keep_ptx=True)
    assert report.ok and report.ptx, report.error
    assert not report.spills
    return report.ptx
