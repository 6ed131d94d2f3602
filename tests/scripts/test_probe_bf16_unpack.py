"""The bf16 unpack probe, without a GPU: its patched source is another kernel (another hash)
that still compiles under NVRTC in every dtype."""

from __future__ import annotations

import pytest
from load_script import load_script

from variants import Config, Shape, get_dtype, get_op


def test_the_patched_family_compiles_in_every_dtype() -> None:
    from variants import nvrtc

    try:
        nvrtc.nvrtc_version()
    except nvrtc.NvrtcUnavailable as exc:  # pragma: no cover - CI installs the nvrtc extra
        pytest.skip(str(exc))
    family = get_op("repkv_rope_backward").family("split")
    twin = load_script("scripts/probes/probe_bf16_unpack.py").patched(family)
    assert twin.source_hash != family.source_hash and type(twin) is type(family)
    assert "IsBf16" in twin.source and "IsBf16" not in family.source
    shape = Shape(4, 2048, 28, 4, 128)
    config = Config.of("split", block=32, items=4, load="plain", store="stcs", vec_bytes=16)
    work = [(twin, twin.name_expression(shape, get_dtype(d), config)) for d in ("fp32", "bf16", "fp16")]
    reports = [r for program in nvrtc.plan_programs(work) for r in nvrtc.compile_program(program)]
    assert len(reports) == 3 and all(r.ok for r in reports), [r.error for r in reports]
