"""bulk: Hopper's bulk asynchronous copy (`cp.async.bulk` with mbarrier completion) moves whole
tiles of G*nrep heads between global and shared memory; persistent blocks, STAGES tiles in
flight each, an optional L2 evict-first policy on the loads. Needs sm_90."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from variants.dtypes import DType
from variants.family import BLOCK_SIZES, Family, Launch, Param
from variants.shape import Shape

STATIC_SHARED_LIMIT = 48 * 1024  # bytes of static shared memory a block may declare
SM_SHARED_BYTES = 228 * 1024  # shared memory of one Hopper SM
BLOCK_RESERVED_BYTES = 1024  # what the runtime keeps per resident block
L2_HINTS = ("none", "evict_first")  # template code 0, 1


class Bulk(Family):
    name = "bulk"
    doc = "bulk async copy of G*nrep-head tiles through shared memory; persistent blocks (sm_90)"
    min_compute_capability = 90
    params = (
        Param("block", BLOCK_SIZES[2:5], "threads per block (they sum the k/v tiles)"),
        Param("groups", (1, 2, 4, 8), "K/V heads per tile (G): a tile is G*nrep heads of dout"),
        Param("stages", (2, 3, 4), "tiles of shared memory per block, loads in flight"),
        Param("blocks_per_sm", (1, 2, 4, 8, 0), "persistent blocks per SM (0: one block per tile)"),
        Param("l2", L2_HINTS, "L2 policy of the loads: none or evict_first"),
    )

    @staticmethod
    def shared_bytes(shape: Shape, dtype: DType, p: Mapping[str, Any]) -> int:
        head = shape.HD * dtype.itemsize
        return p["stages"] * p["groups"] * shape.nrep * head + 3 * p["groups"] * head + 8 * p["stages"]

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        head = shape.HD * dtype.itemsize
        if head % 16:
            return f"a head of HD={shape.HD} {dtype.name} is {head} bytes, not whole 16-byte words"
        if shape.NH_KV % p["groups"]:
            return f"NH_KV={shape.NH_KV} is not divisible by groups={p['groups']}"
        shared = self.shared_bytes(shape, dtype, p)
        if shared > STATIC_SHARED_LIMIT:
            return f"{shared} bytes of shared memory exceed the {STATIC_SHARED_LIMIT} a block may declare"
        if p["blocks_per_sm"] * (shared + BLOCK_RESERVED_BYTES) > SM_SHARED_BYTES:
            return f"{p['blocks_per_sm']} blocks of {shared} bytes of shared memory do not fit one SM"
        return None

    @staticmethod
    def tiles(shape: Shape, p: Mapping[str, Any]) -> int:
        return shape.tokens * 3 * (shape.NH_KV // p["groups"])

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        return [
            dtype.ctype,
            str(p["block"]),
            str(shape.HD),
            str(shape.nrep),
            str(p["groups"]),
            str(p["stages"]),
            str(L2_HINTS.index(p["l2"])),
        ]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        tiles = self.tiles(shape, p)
        if p["blocks_per_sm"] == 0:
            return Launch(tiles, p["block"])
        return Launch(max(1, min(tiles, sm_count * p["blocks_per_sm"])), p["block"])


FAMILY = Bulk()
