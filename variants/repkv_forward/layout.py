"""The tensors of repkv forward, per token: what the op's operands and the families' launches share."""

from __future__ import annotations

from variants.shape import Shape


def out_token_elements(shape: Shape) -> int:
    """out is (B, T, 3, NH, HD): q, then K and V each replicated to NH heads."""
    return 3 * shape.NH * shape.HD


def inp_token_elements(shape: Shape) -> int:
    """inp is the packed GQA qkv (B, T, NH + 2*NH_KV, HD)."""
    return shape.heads_in * shape.HD


def out_numel(shape: Shape) -> int:
    return shape.tokens * out_token_elements(shape)
