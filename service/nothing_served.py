"""Why the service has nothing to serve for an op, worded once for GET /best and the
dashboards: the ops whose rows the store holds instead, and the results files or directories
it could not read (a corrupt or empty parquet, a directory it may not list: /readyz says why)."""

from __future__ import annotations

import weakref

import variants
from results.index import StoreIndex
from results.schema import ops_of

# The ops with rows of each index (they die with it).
_OPS_WITH_ROWS: weakref.WeakKeyDictionary[StoreIndex, frozenset[str]] = weakref.WeakKeyDictionary()


def ops_with_rows(index: StoreIndex) -> frozenset[str]:
    """The ops the index's rows (of every op, any status) measured."""
    found = _OPS_WITH_ROWS.get(index)
    if found is None:
        frame = index.frame
        found = frozenset(ops_of(frame).unique()) if len(frame) else frozenset()
        _OPS_WITH_ROWS[index] = found
    return found


def other_ops(index: StoreIndex, op: str) -> list[str]:
    """The ops other than `op` whose rows the index holds, in variants.OPS order."""
    found = ops_with_rows(index)
    return [name for name in variants.OPS if name != op and name in found]


def unread_files(index: StoreIndex) -> str:
    """'' when every results file and directory was read; else how many were skipped (/readyz
    names each and says why)."""
    count = len(index.report.skipped)
    if not count:
        return ""
    return (
        f"{count} results {'file or directory' if count == 1 else 'files or directories'} could not be read"
    )


def no_results(index: StoreIndex, op: str) -> str:
    """Why op `op` has no tuned configuration to serve: nothing loaded at all, or only other
    ops' rows (named, with the op= that asks for them); and any file that could not be read."""
    others = other_ops(index, op)
    if op == variants.DEFAULT_OP and not others:
        text = "no results are loaded: the results directory has no correct trials yet"
    else:
        text = f"no results of {op} are loaded: tune it with `python -m tuner --op {op}`"
    if others:
        text += f"; the results hold {', '.join(others)} (ask with op={others[0]})"
    unread = unread_files(index)
    return f"{text}; {unread} (see /readyz)" if unread else text
