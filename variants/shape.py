"""The problem size of one repkv backward call, validated once at the edge."""

from __future__ import annotations

import re
from dataclasses import dataclass

from variants.dtypes import DType

INT32_MAX = 2**31 - 1
# Largest size accepted for any one dimension: guards the service and the CLI against
# absurd requests long before anything is allocated.
MAX_DIM = 2**24

_FIELDS = ("B", "T", "NH", "NH_KV", "HD")


class InvalidShape(ValueError):
    """A shape that no kernel can serve (the message says which rule it breaks)."""


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
                raise InvalidShape(f"{name} must be an integer, got {value!r}")
            if value < 1:
                raise InvalidShape(f"{name} must be >= 1, got {value}")
            if value > MAX_DIM:
                raise InvalidShape(f"{name}={value} is larger than the limit {MAX_DIM}")
        if self.NH % self.NH_KV:
            raise InvalidShape(
                f"NH={self.NH} is not divisible by NH_KV={self.NH_KV} "
                "(grouped-query attention needs NH % NH_KV == 0)"
            )

    @property
    def nrep(self) -> int:
        return self.NH // self.NH_KV

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
