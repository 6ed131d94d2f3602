"""Streaming exports of trial rows (GET /results): JSON, CSV or parquet, encoded a chunk of
rows at a time on a few worker threads of their own, never on the event loop.

Every format is encoded from the arrow table the store read (`StoreIndex.table`) with
pyarrow, whose kernels run without the GIL: a large export keeps a core busy but leaves the
event loop free to answer /best. The export threads are `ENCODERS` in all, whatever the
number of exports (one core is left for the event loop), and run at a lower scheduling
priority (nice +10, where the OS allows it): when the machine is short of CPU, /best goes
first and the exports take what is left. Memory is bounded by a chunk or two per export: the
next chunk is encoded only once the last one has been handed to the server, which waits for
the client to take it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

# Rows per chunk: about 2 MB of JSON or 1 MB of CSV; a parquet row group.
JSON_ROWS = CSV_ROWS = 2000
PARQUET_ROWS = 10_000
# Threads encoding exports, all exports together (one core left for the event loop).
ENCODERS = max(1, (os.cpu_count() or 2) - 1)
NICENESS = 10  # added to the export threads' niceness

_CONTROL_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _lower_priority() -> None:
    """Lower the calling thread's scheduling priority (Linux: niceness is per thread; elsewhere
    the threads run as they are)."""
    with contextlib.suppress(AttributeError, OSError):
        thread = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + NICENESS))


_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def executor() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(ENCODERS, thread_name_prefix="export", initializer=_lower_priority)
        return _executor


async def stream(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """`chunks`, each made on an export thread while the event loop waits for it."""
    loop = asyncio.get_running_loop()
    pool = executor()
    while (chunk := await loop.run_in_executor(pool, next, chunks, None)) is not None:
        yield chunk


def _slices(indices: np.ndarray, size: int) -> Iterator[np.ndarray]:
    for start in range(0, len(indices), size):
        yield indices[start : start + size]


class Rows:
    """A table's rows by position, taken batch by batch: arrow's own take on a table of many
    chunks (one per results file) first copies every chunk into one, for each call."""

    def __init__(self, table: pa.Table) -> None:
        self.schema = table.schema
        self.batches = [b for b in table.to_batches() if b.num_rows]
        self.starts = np.cumsum([0] + [b.num_rows for b in self.batches])

    def take(self, indices: np.ndarray) -> pa.Table:
        """The rows at `indices` (ascending), in that order."""
        parts = []
        bounds = np.searchsorted(indices, self.starts)
        for batch, start, lo, hi in zip(self.batches, self.starts, bounds, bounds[1:], strict=False):
            if hi == lo:
                continue
            local = indices[lo:hi] - start
            if local[-1] - local[0] + 1 == len(local):  # a run of rows: a view, no copy
                parts.append(batch.slice(int(local[0]), len(local)))
            else:
                parts.append(batch.take(pa.array(local, type=pa.int64())))
        return pa.Table.from_batches(parts, schema=self.schema)


# --- JSON: each column formatted as JSON text by arrow kernels, then joined row by row ---


def _json_string(column: pa.ChunkedArray) -> pa.ChunkedArray:
    text = pc.replace_substring(column, "\\", "\\\\")
    text = pc.replace_substring(text, '"', '\\"')
    if pc.any(pc.match_substring_regex(text, "[\\x00-\\x1f]")).as_py():
        for code in range(32):
            char = chr(code)
            text = pc.replace_substring(text, char, _CONTROL_ESCAPES.get(char, f"\\u{code:04x}"))
    return pc.binary_join_element_wise('"', text, '"', "")


def _json_values(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Each value as JSON text; null (and a non-finite float) as null."""
    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        text = _json_string(column)
    elif pa.types.is_floating(kind):
        # arrow prints the shortest text that reads back as the same double
        text = pc.if_else(pc.is_finite(column), pc.cast(column, pa.string()), pa.scalar(None, pa.string()))
    elif pa.types.is_integer(kind):
        text = pc.cast(column, pa.string())
    elif pa.types.is_timestamp(kind):
        # ISO 8601 in UTC with the column's fraction of a second, as "2025-01-01T00:00:00.000000Z"
        # (%S carries the fraction); one formatting call, whatever the column's chunks and slices
        utc = column if kind.tz is None else pc.cast(column, pa.timestamp(kind.unit, tz="UTC"))
        text = pc.strftime(utc, format="%Y-%m-%dT%H:%M:%S")
        text = pc.binary_join_element_wise('"', text, 'Z"', "")
    elif pa.types.is_boolean(kind):
        text = pc.if_else(column, "true", "false")
    else:
        raise TypeError(f"no JSON encoding for column type {kind}")
    return pc.fill_null(text, "null")


def json_rows(table: pa.Table, first: bool) -> bytes:
    """Rows as JSON objects separated by commas (with a leading comma unless `first`)."""
    if table.num_rows == 0:
        return b""
    pieces: list[object] = []
    for i, name in enumerate(table.column_names):
        pieces.append((',{"' if i == 0 else ',"') + name + '":')
        pieces.append(_json_values(table.column(name)))
    pieces.append("}")
    rows = pc.binary_join_element_wise(*pieces, "")
    rows = rows.combine_chunks() if isinstance(rows, pa.ChunkedArray) else rows
    # the rows' characters lie end to end in the array's data buffer
    offsets = np.frombuffer(rows.buffers()[1], dtype=np.int32)[rows.offset : rows.offset + len(rows) + 1]
    data = rows.buffers()[2]
    body = data.slice(int(offsets[0]), int(offsets[-1] - offsets[0])).to_pybytes()
    return body[1:] if first else body


def json_chunks(table: pa.Table, indices: np.ndarray, head: bytes) -> Iterator[bytes]:
    """`head` (the object's fields before the rows, ending in `"rows":[`), the rows, `]}`."""
    yield head
    rows = Rows(table)
    for n, part in enumerate(_slices(indices, JSON_ROWS)):
        yield json_rows(rows.take(part), first=n == 0)
    yield b"]}"


# --- CSV: arrow's writer, a header then the rows; integers stay integers, null is empty ---


def csv_chunks(table: pa.Table, indices: np.ndarray) -> Iterator[bytes]:
    header, source = True, Rows(table)
    for part in _slices(indices, CSV_ROWS):
        rows = source.take(part)
        buffer = io.BytesIO()
        pa_csv.write_csv(rows, buffer, pa_csv.WriteOptions(include_header=header))
        header = False
        yield buffer.getvalue()
    if header:  # no rows: the header alone
        buffer = io.BytesIO()
        pa_csv.write_csv(table.schema.empty_table(), buffer)
        yield buffer.getvalue()


# --- parquet: one row group per chunk, each handed on as soon as it is written ---


class _Drain(io.RawIOBase):
    """A write-only stream whose bytes are taken away as they come (parquet's writer asks
    only for write and tell)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.position = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        chunk = bytes(data)
        self.parts.append(chunk)
        self.position += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self.position

    def take(self) -> bytes:
        data = b"".join(self.parts)
        self.parts.clear()
        return data


def parquet_chunks(table: pa.Table, indices: np.ndarray) -> Iterator[bytes]:
    sink, source = _Drain(), Rows(table)
    writer = pq.ParquetWriter(sink, table.schema, compression="zstd")
    try:
        for part in _slices(indices, PARQUET_ROWS):
            writer.write_table(source.take(part), row_group_size=PARQUET_ROWS)
            if data := sink.take():
                yield data
    finally:
        writer.close()
    yield sink.take()
