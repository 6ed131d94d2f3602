"""The problem size of one repkv backward call, validated once at the edge.

Every limit a shape is held to lives here, and `Shape` enforces them on construction, so the
service (422), the command line (a usage error) and the Python API (`InvalidShape`) refuse the
same shapes with the same sentence. They are the limits of the kernels and of the exported
header (`results/header.py`), not of any one GPU's memory:

- each of B, T, NH, NH_KV, HD is >= 1 and at most MAX_DIM (the kernels take them as `int`;
  MAX_DIM keeps every product of two of them far inside 64 bits);
- NH is a multiple of NH_KV (grouped-query attention);
- dinp holds at most MAX_ELEMENTS elements: the launch that serves every shape, `gather` (one
  thread per dinp element) at block 256 (`results.selection.GENERIC_BLOCK`: the last resort of
  GET /best's layout rule, the exported header and the PyTorch op), then stays within CUDA's
  2^31-1 blocks. dout is under 3x dinp, so every byte offset stays below 2^43 and every
  64-bit index far from overflow.

Within these, a family that cannot serve a shape says so itself (`Family.reject`): the
vectorized ones need HD to be a multiple of their vector width, `naive` 32-bit indices, `flat`
a token's row of words within 32 bits, `bulk` a tile within shared memory, and each its grid
within CUDA's. `gather` (one element a thread, 64-bit indices past 2^31) serves every shape
here, whatever HD, NH or nrep, and so does the header's generic launch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from variants.dtypes import DType
from variants.errors import RepkvTuneError

INT32_MAX = 2**31 - 1
# Largest size accepted for any one dimension.
MAX_DIM = 2**24
# Threads per block of the generic launch (results.selection.GENERIC_BLOCK; a test holds them equal).
GENERIC_BLOCK = 256
# dinp elements that one thread per element at GENERIC_BLOCK launches within CUDA's grid (2^31-1).
MAX_ELEMENTS = GENERIC_BLOCK * INT32_MAX
# Heads a token, or a head's size, that no model reaches: a shape over MAX_ELEMENTS with one of
# them above this is blamed on it rather than on B*T.
USUAL_HEAD_LIMIT = 1024

_FIELDS = ("B", "T", "NH", "NH_KV", "HD")


class InvalidShape(RepkvTuneError, ValueError):
    """A shape that no kernel can serve (the message says which rule it breaks, `field` which
    dimension the rule names first)."""

    def __init__(self, message: str, field: str = "B") -> None:
        super().__init__(message)
        self.field = field


def limit_problem(B: int, T: int, NH: int, NH_KV: int, HD: int) -> tuple[str, str] | None:
    """(field, why) for the first limit of the module's list that (B, T, NH, NH_KV, HD) breaks,
    or None. Expects integers; `Shape` checks the types first."""
    for name, value in zip(_FIELDS, (B, T, NH, NH_KV, HD), strict=True):
        if value < 1:
            return name, f"{name} must be >= 1, got {value}"
        if value > MAX_DIM:
            return name, f"{name}={value} is larger than the limit {MAX_DIM}"
    if NH % NH_KV:
        return "NH_KV", (
            f"NH={NH} is not divisible by NH_KV={NH_KV} (grouped-query attention needs NH % NH_KV == 0)"
        )
    elements = B * T * (NH + 2 * NH_KV) * HD
    if elements > MAX_ELEMENTS:
        # blamed on a head dimension where it is beyond any model's, else on the tokens
        field = "HD" if HD > USUAL_HEAD_LIMIT else "NH" if NH + 2 * NH_KV > USUAL_HEAD_LIMIT else "B"
        return field, (
            "the packed (B, T, NH+2*NH_KV, HD) tensor (the backward ops' dinp, the forward ops' inp) "
            f"would hold {B * T}*{NH + 2 * NH_KV}*{HD} = {elements} elements, "
            f"over the kernels' limit {MAX_ELEMENTS} "
            f"(one thread an element at block {GENERIC_BLOCK} within CUDA's 2^31-1 blocks)"
        )
    return None


@dataclass(frozen=True, order=True)
class Shape:
    """dout is (B, T, 3, NH, HD); dinp is (B, T, NH + 2*NH_KV, HD)."""

    B: int
    T: int
    NH: int
    NH_KV: int
    HD: int

    def __post_init__(self) -> None:
        for name in _FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidShape(f"{name} must be an integer, got {value!r}", name)
        problem = limit_problem(self.B, self.T, self.NH, self.NH_KV, self.HD)
        if problem is not None:
            raise InvalidShape(problem[1], problem[0])

    @property
    def nrep(self) -> int:
        return self.NH // self.NH_KV

    @property
    def layout(self) -> tuple[int, int, int]:
        """The head layout (NH, NH_KV, HD): what a model fixes, B and T aside."""
        return self.NH, self.NH_KV, self.HD

    @property
    def tokens(self) -> int:
        return self.B * self.T

    @property
    def heads_in(self) -> int:
        """Heads of dinp per token: NH query heads, then NH_KV key and NH_KV value heads."""
        return self.NH + 2 * self.NH_KV

    @property
    def dout_numel(self) -> int:
        return self.tokens * 3 * self.NH * self.HD

    @property
    def dinp_numel(self) -> int:
        return self.tokens * self.heads_in * self.HD

    def bytes_moved(self, dtype: DType) -> int:
        """The fewest bytes any kernel must move: every dout read once, every dinp written once."""
        return (self.dout_numel + self.dinp_numel) * dtype.itemsize

    @property
    def key(self) -> str:
        return ",".join(f"{name}={getattr(self, name)}" for name in _FIELDS)

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in _FIELDS}

    @classmethod
    def parse(cls, text: str) -> Shape:
        """Parse 'B=8,T=1024,NH=32,NH_KV=8,HD=128' (any order; all five, each once)."""
        pairs: dict[str, int] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            match = re.fullmatch(r"(\w+)\s*=\s*(-?\d+)", part)
            if not match or match.group(1) not in _FIELDS:
                raise InvalidShape(
                    f"cannot read {part!r} in shape {text!r}: expected B=..,T=..,NH=..,NH_KV=..,HD=.."
                )
            if match.group(1) in pairs:
                raise InvalidShape(f"{match.group(1)} is given twice in shape {text!r}: give each name once")
            pairs[match.group(1)] = int(match.group(2))
        missing = [name for name in _FIELDS if name not in pairs]
        if missing:
            raise InvalidShape(f"shape {text!r} lacks {', '.join(missing)}")
        return cls(**pairs)

    def __str__(self) -> str:
        return self.key
