"""Which shapes the graph benchmark measures by default, and which of the store's
configurations join the tuned kernel as sides (no GPU)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuner.peers.names import BENCH_SHAPES
from variants import Config, Shape, get_dtype

if TYPE_CHECKING:
    from results.index import TunedGroup

SMALL_MB = 40  # the peers benchmark's groups under this size in bf16 are the default set


def small_shapes() -> list[Shape]:
    """The peers benchmark's shapes under SMALL_MB in bf16, where event windows disagree."""
    return [s for s in BENCH_SHAPES if s.bytes_moved(get_dtype("bf16")) < SMALL_MB * 1e6]


def leaders(group: TunedGroup | None, n: int) -> list[tuple[int, Config]]:
    """The group's n fastest configurations and each family's fastest, each once, as (rank in
    the group, config) in rank order."""
    if group is None or n <= 0:
        return []
    chosen: dict[int, Config] = dict(enumerate(c.config for c in group.candidates[:n]))
    firsts: dict[str, int] = {}
    for rank, candidate in enumerate(group.candidates):
        firsts.setdefault(candidate.family.name, rank)
    chosen |= {rank: group.candidates[rank].config for rank in firsts.values()}
    return sorted(chosen.items())


def plain_twin(config: Config) -> Config | None:
    """The config with plain global loads and stores, where it has a cache hint (`ldg`, `ldcs`,
    `stcs`) to drop: whether a hint chosen for a cold L2 costs once dout is in it."""
    values = config.values
    if {"load", "store"} - values.keys() or (values["load"], values["store"]) == ("plain", "plain"):
        return None
    return Config.of(config.family, **(values | {"load": "plain", "store": "plain"}))
