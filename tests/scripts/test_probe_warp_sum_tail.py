"""The warp_sum TAIL probe, without a GPU: it finds the store's MQA groups, its kernels differ
from the product's in the block order alone, and every TAIL compiles for each group's config."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from results.store import bundled_results_dir, load_results
from variants import Config, get_dtype, get_op

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "scripts" / "probes" / "probe_warp_sum_tail.py"


def _probe():
    spec = importlib.util.spec_from_file_location("probe_warp_sum_tail", PROBE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _without_role(source: str) -> str:
    """The template with its block-role code (from the role comment to `const I index`) and
    the TAIL argument taken out."""
    source = re.sub(r"    // Copy blocks spread evenly.*?const I index = [^\n]*\n", "", source, flags=re.S)
    return source.replace("int BLOCK, int TAIL, int LOAD", "int BLOCK, int LOAD")


@pytest.mark.parametrize("op", ["repkv_backward", "repkv_rope_backward"])
def test_the_probe_templates_are_warp_sum_but_for_the_block_order(op: str) -> None:
    probe = _probe()
    ours, theirs = probe.TAIL_FAMILIES[op], get_op(op).families["warp_sum"]
    assert _without_role(ours.source) == _without_role(theirs.source)
    assert ours.source != theirs.source and ours.source_hash != theirs.source_hash


def test_a_warp_sum_template_without_the_role_code_is_refused() -> None:
    with pytest.raises(ValueError, match="update the probe"):
        _probe().with_tail("template <typename T, int BLOCK, int LOAD> __global__ void k() {}")


@pytest.mark.parametrize("op", ["repkv_backward", "repkv_rope_backward"])
def test_every_tail_compiles_at_the_stores_mqa_groups(op: str) -> None:
    from variants import nvrtc

    try:
        nvrtc.nvrtc_version()
    except nvrtc.NvrtcUnavailable as exc:  # pragma: no cover - CI installs the nvrtc extra
        pytest.skip(str(exc))
    probe = _probe()
    groups = probe.groups(load_results(bundled_results_dir())[0], "h200", op)
    assert groups and all(shape.NH_KV == 1 for shape, _, _ in groups)
    family = probe.TAIL_FAMILIES[op]
    shape, dtype, config = groups[0]
    expressions = [
        family.name_expression(shape, get_dtype(dtype), Config.of("warp_sum", **{**config.values, "tail": t}))
        for t in probe.TAILS
    ]
    reports = nvrtc.compile_expressions(family, expressions)
    assert all(r.ok and not r.spills for r in reports), [r.error for r in reports if not r.ok]
