"""The cache of cheap answers (results.bounded_cache): bounded, whatever is asked."""

from __future__ import annotations

from results.bounded_cache import BoundedCache


def test_the_cache_empties_itself_when_full_and_keeps_the_new_entry() -> None:
    cache = BoundedCache(3)
    for key in "abc":
        assert cache.put(key, key.upper()) == key.upper()
    assert dict(cache) == {"a": "A", "b": "B", "c": "C"}
    assert cache.put("d", "D") == "D"
    assert dict(cache) == {"d": "D"}
    for n in range(1000):
        cache.put(n, n)
        assert len(cache) <= 3
