"""`python -m tuner --op ...`: a study searches the op's own families, and its rows carry the op."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from tuner_fakes import IDENTITY, SMALL, _noise

from results.schema import Status
from results.store import load_results
from tuner.run.pipeline import tune
from tuner.run.request import TuneError, TuneRequest
from tuner.runners.bench import BenchRunner
from tuner.runners.runner import Measurement
from variants import DTYPES, OPS, Config, DType, Shape


def op_copy_ms(op_name: str):
    op = OPS[op_name]
    return lambda shape, dtype: op.bytes_moved(shape, dtype) / 4e12 * 1e3


def op_bench(op_name: str):
    copy = op_copy_ms(op_name)

    def bench(shape: Shape, dtype: DType, config: Config) -> Measurement:
        t = copy(shape, dtype) * (3.0 if config.family == "naive" else 1.1) * _noise(config.key)
        return Measurement(status=Status.OK, time_ms=t, p20_ms=t, p80_ms=t, reps=50)

    return bench


@pytest.mark.parametrize("op_name", [name for name in OPS if name != "repkv_backward"])
def test_a_study_of_another_op_searches_its_families_and_files_rows_under_it(
    op_name: str, tmp_path: Path
) -> None:
    runner = BenchRunner(op_bench(op_name), IDENTITY, op_copy_ms(op_name))
    request = TuneRequest(
        op=op_name, shapes=(SMALL,), dtypes=("bf16",), trials=6, results_dir=tmp_path, seed=1, progress=False
    )
    result = tune(request, runner=runner)
    families = set(OPS[op_name].families)
    assert runner.calls and {config.family for _, _, config in runner.calls} <= families
    frame, _ = load_results([tmp_path])
    assert len(frame) == result.rows > 0
    assert set(frame["op"]) == {op_name} and set(frame["family"]) <= families
    assert set(frame["name_expression"].str.split("<").str[0]) <= {f"{op_name}_{f}" for f in families}
    assert all(o.plan.study_name.startswith(f"{op_name}-") for o in result.outcomes)
    # the copy ratio is over the op's own bytes
    row = frame.iloc[0]
    assert row["bytes_moved"] == OPS[op_name].bytes_moved(SMALL, DTYPES["bf16"])


def test_an_unknown_op_or_a_family_of_another_op_is_refused(tmp_path: Path) -> None:
    runner = BenchRunner(op_bench("repkv_forward"), IDENTITY, op_copy_ms("repkv_forward"))
    with pytest.raises(TuneError, match="unknown op 'rope'"):
        tune(TuneRequest(op="rope", shapes=(SMALL,), results_dir=tmp_path), runner=runner)
    with pytest.raises(TuneError, match="unknown family 'tile' of repkv_forward"):
        tune(
            TuneRequest(op="repkv_forward", families=("tile",), shapes=(SMALL,), results_dir=tmp_path),
            runner=runner,
        )


@pytest.mark.parametrize("op_name", ["rope_repkv_forward", "repkv_rope_backward"])
def test_a_shape_no_kernel_of_the_op_serves_is_refused_saying_why(op_name: str, tmp_path: Path) -> None:
    """Odd HD for a RoPE op: refused before anything runs, with the op's rule (it was a
    misleading "the recording has no copy time" in a replay)."""
    runner = BenchRunner(op_bench(op_name), IDENTITY, op_copy_ms(op_name))
    odd = Shape(2, 64, 8, 2, 127)
    with pytest.raises(TuneError, match=f"{op_name} cannot run B=2,T=64,NH=8,NH_KV=2,HD=127: HD=127 is odd"):
        tune(TuneRequest(op=op_name, shapes=(SMALL, odd), results_dir=tmp_path), runner=runner)
    assert not runner.calls
    assert OPS["repkv_backward"].rejection(odd) is None


def test_best_shows_one_ops_winners(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from trial_rows import trial

    from results.store import write_table
    from tuner.cli.main import main

    forward = {"block": 256, "vec_bytes": 16, "load": "plain", "store": "plain"}
    rows = [
        trial("h200", SMALL, "bf16", "vec", forward, 0.02, op="repkv_forward"),
        trial("h200", SMALL, "bf16", "vec", forward, 0.03),
    ]
    write_table(rows, tmp_path / "h200", "two-ops")
    best = ["best", "--results", str(tmp_path), "--no-bundled", "--format", "csv"]
    assert main(best) == 0
    default = capsys.readouterr().out
    assert "0.03" in default and "0.02" not in default
    assert (
        main(["best", "--results", str(tmp_path), "--no-bundled", "--format", "csv", "--op", "repkv_forward"])
        == 0
    )
    forward_out = capsys.readouterr().out
    assert "0.02" in forward_out and "0.03" not in forward_out
    assert main(["best", "--results", str(tmp_path), "--no-bundled", "--op", "rope_repkv_forward"]) == 1
    assert "no trial rows of rope_repkv_forward" in capsys.readouterr().err


def test_the_winners_of_a_fused_op_are_set_against_its_naive_kernel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trial_rows import trial

    from results.store import write_table
    from tuner.cli.main import main

    vec = {"block": 256, "vec_bytes": 16, "load": "plain", "store": "plain"}
    rows = [
        trial("h200", SMALL, "bf16", "vec", vec, 0.02, op="repkv_rope_backward"),
        trial("h200", SMALL, "bf16", "naive", {"block": 128}, 0.08, op="repkv_rope_backward"),
    ]
    write_table(rows, tmp_path / "h200", "fused")
    assert main(["best", "--results", str(tmp_path), "--no-bundled", "--op", "repkv_rope_backward"]) == 0
    out = capsys.readouterr().out
    assert "vs naive" in out and "vs llm.c" not in out


def test_families_that_serve_no_configuration_of_a_shape_are_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    """--family warp_sum at HD 256 in fp32 (a head of 64 or 128 words, which do not divide a
    warp): refused up front, naming the group and why (a study with no configuration to search
    stopped the run with a traceback after the groups before it)."""
    op_name = "repkv_backward"
    runner = BenchRunner(op_bench(op_name), IDENTITY, op_copy_ms(op_name))
    hd256 = Shape(4, 64, 8, 1, 256)
    request = TuneRequest(
        op=op_name,
        families=("warp_sum",),
        shapes=(SMALL, hd256),
        dtypes=("bf16", "fp32"),
        results_dir=tmp_path,
    )
    with pytest.raises(
        TuneError,
        match=r"--family warp_sum serves B=4,T=64,NH=8,NH_KV=1,HD=256 fp32 \(warp_sum: HD=256 is \d+ words",
    ):
        tune(request, runner=runner)
    assert not runner.calls and not list(tmp_path.iterdir())
    fine = dataclasses.replace(request, dtypes=("bf16",), trials=3, seed=1, progress=False)
    assert tune(fine, runner=runner).rows > 0
    assert {config.family for _, _, config in runner.calls} == {"warp_sum"}
