"""The warp_sum_runtime probe, without a GPU: it finds the store's MQA groups of both backward
ops, and both of its kernels compile for a group's stored configuration."""

from __future__ import annotations

import pytest
from load_script import load_script

from results.store import bundled_results_dir, load_results
from variants import Config, get_dtype, get_op


@pytest.mark.parametrize("op", ["repkv_backward", "repkv_rope_backward"])
def test_the_probe_times_both_kernels_at_the_stores_mqa_groups(op: str) -> None:
    from variants import nvrtc

    try:
        nvrtc.nvrtc_version()
    except nvrtc.NvrtcUnavailable as exc:  # pragma: no cover - CI installs the nvrtc extra
        pytest.skip(str(exc))
    probe = load_script("scripts/probes/probe_warp_sum_runtime.py")
    groups = probe.groups(load_results(bundled_results_dir())[0], "h200", op)
    assert len(groups) >= 10 and all(shape.NH_KV == 1 and "tail" in p for shape, _, p in groups)
    shape, dtype, params = groups[-1]
    for name in ("warp_sum", "warp_sum_runtime"):
        family = get_op(op).families[name]
        expression = family.name_expression(shape, get_dtype(dtype), Config.of(name, **params))
        (report,) = nvrtc.compile_expressions(family, [expression])
        assert report.ok and not report.spills, report.error
