"""warp_sum_runtime: warp_sum's template with the head layout read at run time (its HDV and NREP
template arguments 0), one instantiation for every layout whose head's words divide a warp's 32
lanes: what the exported header launches for an MQA layout nobody tuned."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from variants.dtypes import DType
from variants.shape import Shape
from variants.warp_sum import WarpSum


class RuntimeLayout:
    """A warp_sum whose template arguments HDV and NREP are 0: the kernel reads them off the layout."""

    name = "warp_sum_runtime"
    layout_free = True
    template_of = "warp_sum"

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        dtype_arg, vec_bytes, _words, _nrep, *rest = super().template_args(shape, dtype, p)  # type: ignore[misc]
        return [dtype_arg, vec_bytes, "0", "0", *rest]


class WarpSumRuntime(RuntimeLayout, WarpSum):
    doc = "warp_sum with the head layout at run time: one kernel for any layout whose head's words divide 32"


FAMILY = WarpSumRuntime()
