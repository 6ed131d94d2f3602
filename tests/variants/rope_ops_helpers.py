"""What the fused RoPE ops' tests share (test_rope_ops_*.py): the two ops and the shapes."""

from __future__ import annotations

from variants.dtypes import DTYPES
from variants.repkv_rope_backward import OP as BACKWARD
from variants.rope_repkv_forward import OP as FORWARD
from variants.shape import Shape

OPS = (FORWARD, BACKWARD)
BF16 = DTYPES["bf16"]
# MQA with nrep 4, MHA, nrep 3 at HD 64; T never a power of two
SHAPES = (Shape(2, 5, 4, 1, 6), Shape(1, 7, 3, 3, 10), Shape(3, 3, 6, 2, 64), Shape(2, 11, 6, 2, 10))
