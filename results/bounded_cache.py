"""A dict for answers that are cheap to recompute: it empties itself when full, so that a flood
of distinct requests cannot grow memory without bound (the store index's choices, the
service's `/best` bodies)."""

from __future__ import annotations

from typing import Any

CHOICE_CACHE_SIZE = 65536


class BoundedCache(dict):
    """A dict that empties itself when it holds `size` entries and another is put."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def put(self, key: Any, value: Any) -> Any:
        if len(self) >= self.size:
            self.clear()
        self[key] = value
        return value
