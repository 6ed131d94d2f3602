"""The header's segments probe B*T up to 2^40 whatever variants.shape refuses to serve."""

from __future__ import annotations

import variants
from results.header import MAX_TOKENS, segments


def test_segments_of_a_wide_layout_probe_past_the_element_limit() -> None:
    # 128 MHA heads of 128: 2^24 tokens are past variants.shape.MAX_ELEMENTS; the bisection
    # over B*T must still run (it raised InvalidShape once Shape held that limit)
    shape = variants.Shape(1, 1024, 128, 128, 128)
    assert shape.dinp_numel * 2**14 > variants.shape.MAX_ELEMENTS
    gather = variants.get_family("gather")
    config = variants.Config.of("gather", block=256, load="plain", store="plain")
    found = segments(gather, shape, variants.get_dtype("bf16"), config)
    assert [s.name_expression.endswith("int>") for s in found] == [True, False]
    assert found[0].max_tokens < found[1].max_tokens <= MAX_TOKENS
