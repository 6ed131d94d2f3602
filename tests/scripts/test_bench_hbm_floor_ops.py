"""scripts/bench_hbm_floor.py --op: each op's traffic, the twin where the op writes more than it
reads, the streaming buffers, the op column of the table and the command line (no GPU)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from bench_hbm_floor import output_name, parse_args, store_groups, summary, traffic  # noqa: E402
from bench_hbm_floor_parts.stream import (  # noqa: E402
    WORD,
    stream_buffers,
    twin_fraction,
    twin_pairs,
    twin_plan,
    twin_targets,
)

from variants import DEFAULT_OP, OPS, Shape, get_dtype, get_op  # noqa: E402

SHAPES = [
    Shape(B=2, T=3, NH=32, NH_KV=8, HD=128),  # nrep 4
    Shape(B=1, T=5, NH=8, NH_KV=8, HD=64),  # nrep 1: MHA
    Shape(B=3, T=2, NH=14, NH_KV=1, HD=64),  # MQA
    Shape(B=4, T=7, NH=24, NH_KV=8, HD=128),  # nrep 3
]


@pytest.mark.parametrize("op_name", list(OPS))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.key)
@pytest.mark.parametrize("dtype_name", ["fp32", "bf16"])
def test_traffic_is_the_ops_inputs_read_and_its_output_written(
    op_name: str, shape: Shape, dtype_name: str
) -> None:
    op, dtype = get_op(op_name), get_dtype(dtype_name)
    read, write = traffic(shape, dtype, op)
    assert read == sum(o.numel(shape) for o in op.inputs) * dtype.itemsize
    assert write == op.output.numel(shape) * dtype.itemsize
    assert read + write == op.bytes_moved(shape, dtype)


def test_traffic_in_head_units_per_token() -> None:
    shape, bf16 = Shape(B=2, T=3, NH=32, NH_KV=8, HD=128), get_dtype("bf16")
    unit = shape.tokens * shape.HD * bf16.itemsize  # one head of every token
    freqs = shape.T * shape.HD * bf16.itemsize  # freqs_cis (T, HD)
    assert traffic(shape, bf16) == traffic(shape, bf16, get_op(DEFAULT_OP)) == (96 * unit, 48 * unit)
    assert traffic(shape, bf16, get_op("repkv_forward")) == (48 * unit, 96 * unit)
    assert traffic(shape, bf16, get_op("rope_repkv_forward")) == (48 * unit + freqs, 96 * unit)
    assert traffic(shape, bf16, get_op("repkv_rope_backward")) == (96 * unit + freqs, 48 * unit)


def test_nrep_one_reads_as_much_as_it_writes_without_freqs() -> None:
    shape, fp32 = SHAPES[1], get_dtype("fp32")
    read, write = traffic(shape, fp32, get_op("repkv_forward"))
    assert read == write
    assert twin_plan(read // WORD, write // WORD)[0] == "twin"


@pytest.mark.parametrize("read_words,write_words", [(48, 96), (32, 48), (80, 192), (3, 7), (1, 1000), (5, 6)])
def test_the_twin_out_stores_every_output_word_once_and_loads_every_input_word(
    read_words: int, write_words: int
) -> None:
    kernel, n, f = twin_plan(read_words, write_words)
    assert (kernel, n) == ("twin_out", write_words)
    assert f == twin_fraction(write_words, read_words) <= 2**32
    pairs = twin_pairs(read_words, write_words)
    assert [o for _, o in pairs] == twin_targets(read_words, write_words) == list(range(write_words))
    loads = [i for i, _ in pairs]
    assert loads == sorted(loads)  # in order: the streams stay interleaved
    assert sorted(set(loads)) == list(range(read_words))  # every input word, none past the end


def test_the_twin_out_spreads_reads_evenly_over_the_writes() -> None:
    # repkv forward at nrep 4: 48 head-units read a token, 96 written: each input word feeds two
    loads = [i for i, _ in twin_pairs(48, 96)]
    assert all(loads.count(i) == 2 for i in range(48))


def test_the_twin_where_reads_outnumber_writes_is_unchanged() -> None:
    kernel, n, f = twin_plan(96, 48)
    assert (kernel, n, f) == ("twin", 96, twin_fraction(96, 48))
    assert [i for i, _ in twin_pairs(96, 48)] == list(range(96))


def test_the_twin_out_step_holds_on_large_buffers() -> None:
    # repkv forward's largest default shape in fp32: 16-byte words, unsigned 64-bit products
    read_words, write_words = 50_331_648 - 7, 100_663_296
    _, n, f = twin_plan(read_words, write_words)
    assert ((n - 1) * f) >> 32 == read_words - 1
    assert n * f < 2**64


@pytest.mark.parametrize("op_name", list(OPS))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.key)
def test_the_twin_covers_each_ops_traffic(op_name: str, shape: Shape) -> None:
    read, write = traffic(shape, get_dtype("bf16"), get_op(op_name))
    pairs = twin_pairs(read // WORD, write // WORD)
    assert [o for _, o in pairs if o >= 0] == list(range(write // WORD))
    assert sorted({i for i, _ in pairs}) == list(range(read // WORD))


@pytest.mark.parametrize("op_name", list(OPS))
def test_the_streaming_buffers_hold_both_sides(op_name: str) -> None:
    op, shape, dtype = get_op(op_name), SHAPES[0], get_dtype("bf16")
    first = np.zeros(op.inputs[0].numel(shape), dtype=np.uint16)
    out = np.zeros(op.output.numel(shape), dtype=np.uint16)
    read, write = traffic(shape, dtype, op)
    src, dst = stream_buffers(first, out, read, write, np)
    assert src.nbytes == read // WORD * WORD and dst.nbytes == write // WORD * WORD
    assert (src == 1).all()
    assert np.shares_memory(dst, out)  # the output is all of what is written
    # the first input is all that is read but for freqs_cis, which the RoPE ops read too
    assert np.shares_memory(src, first) == (len(op.inputs) == 1)


def probe_rows(op: str, tuned: float) -> list[dict]:
    times = {"memcpy": 1.00, "tuned": tuned, "read": 0.35, "write": 0.60, "copy": 1.01, "twin": 0.98}
    base = {"op": op, "shape": "B=8,T=1024,NH=32,NH_KV=8,HD=128", "dtype": "bf16", "MB": 302.0}
    return [base | {"side": side, "time_ms": t, "device_us": 1000 * t - 2} for side, t in times.items()]


def test_summary_keeps_each_op_apart() -> None:
    frame = pd.DataFrame(probe_rows("repkv_backward", 0.97) + probe_rows("repkv_forward", 0.99))
    table = summary(frame)
    assert list(table["op"]) == ["repkv_backward", "repkv_forward"]
    assert list(table["tuned"]) == pytest.approx([0.97, 0.99])


def test_render_names_the_op(tmp_path: Path) -> None:
    frame = pd.DataFrame(probe_rows("repkv_forward", 0.99) + probe_rows("rope_repkv_forward", 1.02))
    frame.to_parquet(tmp_path / "hbm_repkv_forward.parquet", index=False)
    script = str(ROOT / "scripts" / "bench_hbm_floor.py")
    command = [sys.executable, script, "--render", str(tmp_path / "hbm_repkv_forward.parquet")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "| op | shape | dtype | MB |" in done.stdout
    row = "| repkv_forward | B=8,T=1024,NH=32,NH_KV=8,HD=128 | bf16 | 302.0 | 1.010 | 0.950 | 0.980 | 0.990 |"
    assert row in done.stdout
    assert "| rope_repkv_forward | B=8,T=1024,NH=32,NH_KV=8,HD=128 | bf16 | 302.0 |" in done.stdout


def test_the_op_defaults_to_repkv_backward_and_names_the_file() -> None:
    args = parse_args([])
    assert args.op == DEFAULT_OP == "repkv_backward"
    assert output_name(args.op) == "hbm.parquet"  # as before --op
    args = parse_args(["--op", "repkv_forward", "--store", "--out", "x"])
    assert (args.op, args.store, args.out) == ("repkv_forward", True, Path("x"))
    assert output_name(args.op) == "hbm_repkv_forward.parquet"


@pytest.mark.parametrize("op_name", list(OPS))
def test_every_op_is_a_choice(op_name: str) -> None:
    assert parse_args(["--op", op_name]).op == op_name


def test_an_unknown_op_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(["--op", "rope_forward"])
    assert exited.value.code == 2
    assert "repkv_forward" in capsys.readouterr().err  # the choices are listed


def test_help_lists_the_op_without_a_gpu() -> None:
    command = [sys.executable, str(ROOT / "scripts" / "bench_hbm_floor.py"), "--help"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "--op" in done.stdout and "rope_repkv_forward" in done.stdout


class FakeIndex:
    """for_op and groups_of of a StoreIndex: each op's tuned groups on each GPU label."""

    def __init__(self, groups: dict[str, list]) -> None:
        self.groups = groups
        self.asked: list[str] = []

    def for_op(self, op: str) -> FakeIndex:
        self.asked.append(op)
        return FakeIndex({"h200": self.groups[op]})

    def groups_of(self, label: str) -> list:
        return self.groups.get(label, [])


def test_store_iterates_the_ops_tuned_groups_smallest_first() -> None:
    big, small = Shape(B=8, T=1024, NH=32, NH_KV=8, HD=128), Shape(B=1, T=1024, NH=32, NH_KV=8, HD=128)
    group = lambda shape, dtype: SimpleNamespace(shape=shape, dtype=get_dtype(dtype))  # noqa: E731
    index = FakeIndex(
        {
            "repkv_backward": [group(big, "bf16")],
            "repkv_forward": [group(big, "bf16"), group(small, "fp32"), group(small, "bf16")],
        }
    )
    got = store_groups(index, "h200", get_op("repkv_forward"))
    assert got == [(small, "bf16"), (small, "fp32"), (big, "bf16")]
    assert index.asked == ["repkv_forward"]
    assert store_groups(index, "h200") == [(big, "bf16")]  # the default op's
