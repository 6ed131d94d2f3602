"""Streaming exports of trial rows (GET /results): JSON, CSV or parquet, encoded a chunk of
rows at a time in worker threads, never on the event loop.

Every format is encoded from the arrow table the store read (`StoreIndex.table`) with
pyarrow, whose kernels run without the GIL: a large export keeps a core busy but leaves the
event loop free to answer /best. At most `ENCODERS` chunks are encoded at once, whatever the
number of exports, so that one core stays for the event loop. Memory is bounded by a few
chunks per export: the next chunk is encoded only once the last one has been handed to the
server, which waits for the client to take it.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

# Rows per chunk: about 1 MB of JSON or 0.5 MB of CSV; a parquet row group.
JSON_ROWS = CSV_ROWS = 1000
PARQUET_ROWS = 10_000
# Chunks encoded at once across every export (one core left for the event loop).
ENCODERS = max(1, (os.cpu_count() or 2) - 1)
_encoders = threading.BoundedSemaphore(ENCODERS)

_CONTROL_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _slices(indices: np.ndarray, size: int) -> Iterator[np.ndarray]:
    for start in range(0, len(indices), size):
        yield indices[start : start + size]


def _take(table: pa.Table, indices: np.ndarray) -> pa.Table:
    with _encoders:
        return table.take(pa.array(indices, type=pa.int64()))


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
        # ISO 8601 in UTC with microseconds, as "2025-01-01T00:00:00.000000Z"
        naive = pc.cast(column, pa.timestamp(kind.unit))
        text = pc.replace_substring(pc.cast(naive, pa.string()), " ", "T", max_replacements=1)
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
    with _encoders:
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
    for n, part in enumerate(_slices(indices, JSON_ROWS)):
        yield json_rows(_take(table, part), first=n == 0)
    yield b"]}"


# --- CSV: arrow's writer, a header then the rows; integers stay integers, null is empty ---


def csv_chunks(table: pa.Table, indices: np.ndarray) -> Iterator[bytes]:
    header = True
    for part in _slices(indices, CSV_ROWS):
        rows = _take(table, part)
        buffer = io.BytesIO()
        with _encoders:
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
    sink = _Drain()
    writer = pq.ParquetWriter(sink, table.schema, compression="zstd")
    try:
        for part in _slices(indices, PARQUET_ROWS):
            rows = _take(table, part)
            with _encoders:
                writer.write_table(rows, row_group_size=PARQUET_ROWS)
            if data := sink.take():
                yield data
    finally:
        writer.close()
    yield sink.take()
