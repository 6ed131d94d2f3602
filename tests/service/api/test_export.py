"""The export encoders on their own."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from trial_rows import S1, S2, VEC16, trial

from results.store import to_table
from service.api import export


@pytest.fixture
def chunked() -> pa.Table:
    """Three files' rows: a table of three chunks of 5, 0 and 7 rows."""
    rows = [trial("h100", S1 if n % 2 else S2, "bf16", "vec", VEC16, 0.1 + n, number=n) for n in range(12)]
    frame = pd.DataFrame(rows)
    return pa.concat_tables([to_table(frame[:5]), to_table(frame[:0]), to_table(frame[5:])])


@pytest.mark.parametrize(
    "indices", [[0, 1, 2], [3, 4, 5, 6], [0, 2, 5, 11], list(range(12)), [11], [4, 5], [1, 6, 7, 8]]
)
def test_rows_are_taken_across_chunks(chunked: pa.Table, indices: list[int]) -> None:
    taken = export.Rows(chunked).take(np.array(indices))
    assert taken.to_pylist() == chunked.combine_chunks().take(indices).to_pylist()
    assert taken.schema == chunked.schema


def test_every_format_encodes_the_same_rows(chunked: pa.Table) -> None:
    indices = np.array([0, 3, 4, 5, 9, 11])
    expected = chunked.combine_chunks().take(indices).to_pandas()
    body = b"".join(export.json_chunks(chunked, indices, b'{"rows":['))
    got = pd.DataFrame(json.loads(body)["rows"])
    assert list(got["trial"]) == list(expected["trial"]) and list(got["time_ms"]) == list(expected["time_ms"])
    csv = pd.read_csv(io.BytesIO(b"".join(export.csv_chunks(chunked, indices))))
    assert list(csv["trial"]) == list(expected["trial"])
    table = pq.read_table(io.BytesIO(b"".join(export.parquet_chunks(chunked, indices))))
    assert table.to_pandas()["trial"].tolist() == list(expected["trial"])
