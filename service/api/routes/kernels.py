"""GET /kernels/{source_hash}: the CUDA source of a current kernel family, of any op."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import PlainTextResponse

import variants
from service.api.errors import NotFound
from service.api.models import ErrorBody

router = APIRouter(tags=["kernels"])

# Every op's templates: /best links each answer's source here, whichever op it answered for. A
# family instantiating another's template (warp_sum_runtime) shares its source and its hash.
SOURCES: dict[str, tuple[str, variants.Family]] = {
    family.source_hash: (op.name, family)
    for op in variants.OPS.values()
    for family in op.families.values()
    if family.template_of is None
}


@router.get(
    "/kernels/{source_hash}",
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "CUDA C++ source"},
        404: {"model": ErrorBody, "description": "not the hash of a current family's source"},
    },
    summary="Kernel source by hash",
)
async def kernel_source(
    source_hash: Annotated[str, Path(pattern=r"^[0-9a-fA-F]{16}$", description="16 hex digits, either case")],
) -> PlainTextResponse:
    """The whole compilation unit of the family whose current source has this hash.
    Only current sources are served: a hash from an older source gives 404."""
    source_hash = source_hash.lower()  # hex in either case names one hash (the store writes lower case)
    found = SOURCES.get(source_hash)
    if found is None:
        raise NotFound(
            "no current kernel family has this source hash",
            [f"{h} ({op} {f.name})" for h, (op, f) in SOURCES.items()],
        )
    op, family = found
    return PlainTextResponse(
        family.source,
        headers={
            "ETag": f'"{source_hash}"',
            "Cache-Control": "public, max-age=31536000, immutable",
            "X-Kernel-Family": family.name,
            "X-Kernel-Op": op,
        },
    )
