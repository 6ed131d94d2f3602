"""The header export: its table, its dispatch rule against the service's selection, and the
generated header compiled with nvcc and asked for its dispatch decisions, every op's (no GPU
needed). tests/results/test_header_ops.py holds the other ops' tables and entry points."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from toolchain import nvcc_path as _nvcc
from trial_rows import S1, S2, SPLIT16, VEC16, WPH, trial

import variants
from results.header import ExportError, export_header, export_table, plan, segments
from results.header_render import render_header
from results.index import build_index
from results.recipe import build_recipe
from results.selection import select
from results.store import bundled_results_dir, load_results
from variants import Shape

HARNESS = Path(__file__).resolve().parents[2] / "results" / "header_harness.cu"
BF16 = variants.get_dtype("bf16")


def synthetic_index():
    rows = [
        trial("h100", S1, "bf16", "split", SPLIT16, 0.09, number=0),
        trial("h100", S1, "bf16", "vec", VEC16, 0.10, number=1),
        trial("h100", S2, "bf16", "vec", VEC16, 0.02, number=2),
        # same B*T as S1: the first in (B, T) order is kept
        trial("h100", Shape(4, 2048, 32, 8, 128), "bf16", "vec", VEC16, 0.08, number=3),
        trial("h100", S1, "fp32", "vec", VEC16, 0.18, number=0),
    ]
    return build_index(pd.DataFrame(rows))


def test_one_row_per_tuned_dtype_layout_and_token_count() -> None:
    table = export_table(synthetic_index(), "h100")
    keys = [(r.dtype, r.tokens, r.tuned_shape) for r in table.rows]
    assert keys == [
        ("bf16", 1024, S2.key),
        ("bf16", 8192, Shape(4, 2048, 32, 8, 128).key),
        ("fp32", 8192, S1.key),
    ]
    assert (
        table.rows[0].family == "vec" and table.source_hashes["vec"] == variants.get_family("vec").source_hash
    )


def test_dtype_filter_and_unknown_gpu() -> None:
    index = synthetic_index()
    assert {r.dtype for r in export_table(index, "h100", ["fp32"]).rows} == {"fp32"}
    with pytest.raises(ExportError, match="h100"):
        export_table(index, "b200")
    assert export_table(index, "b200", other_gpus=True).measured_gpu == "h100"


def test_segments_cover_every_token_count_with_the_family_expression() -> None:
    split = variants.get_family("split")
    config = variants.Config.of("split", **SPLIT16)
    found = segments(split, S1, BF16, config)
    assert [s.name_expression.endswith("int>") for s in found] == [True, False]
    for tokens in (1, 1000, found[0].max_tokens, found[0].max_tokens + 1, 10**7):
        shape = Shape(1, tokens, 32, 8, 128) if tokens <= variants.shape.MAX_DIM else None
        if shape is None:
            continue
        expected = split.name_expression(shape, BF16, config)
        serving = next(s for s in found if tokens <= s.max_tokens)
        assert serving.name_expression == expected


def test_plan_follows_the_selection_rule_within_a_tuned_layout() -> None:
    index = build_index(load_results(bundled_results_dir())[0])
    table = export_table(index, "h200")
    rng = random.Random(0)
    layouts = {(r.dtype, r.NH, r.NH_KV, r.HD) for r in table.rows}
    checked = 0
    demoted: set[int] = set()  # rows that serve a runner-up of a bulk winner
    for dtype, nh, nh_kv, hd in sorted(layouts):
        for _ in range(20):
            shape = Shape(rng.randint(1, 32), rng.choice([1, 7, 128, 1000, 2048, 4096]), nh, nh_kv, hd)
            got = plan(table, dtype, shape)
            choice = select(index, "h200", shape, variants.get_dtype(dtype))
            assert choice is not None and got.row >= 0
            row = table.rows[got.row]
            assert choice.group.shape.tokens == row.tokens
            group, candidate, recipe = choice.group, choice.candidate, choice.recipe
            if candidate.family.grid_terms(group.shape, group.dtype, candidate.config.values) is None:
                # a winner of bulk: the row holds the group's fastest with grid terms
                candidate = next(
                    c
                    for c in group.candidates
                    if c.family.grid_terms(group.shape, group.dtype, c.config.values) is not None
                )
                recipe = build_recipe(candidate, shape, variants.get_dtype(dtype))
                demoted.add(got.row)
            assert candidate.config_key == row.config_key
            assert (got.grid, got.block) == (recipe.grid, recipe.block)
            assert table.rows[got.row].segments[got.kernel % 2].name_expression == recipe.name_expression
            checked += 1
    assert checked >= 100 and 0 < len(demoted) <= table.runner_up_rows
    # tile's grid, heads_in * ceil(B*T / tokens), is launch data: its winners serve from the header
    tiles = [r for r in table.rows if r.family == "tile"]
    assert tiles and all(len(r.grid_terms) == 1 and r.grid_terms[0].a == 1 for r in tiles)


def test_a_bulk_winner_is_served_by_its_shapes_fastest_launchable_runner_up() -> None:
    bulk = {"block": 128, "groups": 2, "stages": 3, "blocks_per_sm": 2, "l2": "evict_first"}
    index = build_index(
        pd.DataFrame(
            [
                trial("h100", S1, "bf16", "bulk", bulk, 0.07, number=0),
                trial("h100", S1, "bf16", "split", SPLIT16, 0.08, number=1),
                trial("h100", S1, "bf16", "vec", VEC16, 0.09, number=2),
            ]
        )
    )
    table = export_table(index, "h100")
    assert [r.family for r in table.rows] == ["split"] and table.runner_up_rows == 1
    assert "// 1 rows serve their shape's fastest configuration whose grid is a" in render_header(table)
    assert "rows serve their shape's fastest" not in render_header(export_table(synthetic_index(), "h100"))


def test_untuned_layouts_get_the_layout_rules_choice_for_their_class() -> None:
    """warp_per_head ran within 2% of the optimum at every tuned shape and vec 30% behind: a
    layout without rows is served warp_per_head (a layout-free family), not a fixed vec."""
    rows = []
    for n, shape in enumerate([S1, S2, Shape(2, 512, 16, 4, 128)]):
        rows.append(trial("h100", shape, "bf16", "split", SPLIT16, 1.00, number=3 * n))
        rows.append(trial("h100", shape, "bf16", "warp_per_head", WPH, 1.02, number=3 * n + 1))
        rows.append(trial("h100", shape, "bf16", "vec", VEC16, 1.30, number=3 * n + 2))
    table = export_table(build_index(pd.DataFrame(rows)), "h100")
    untuned = Shape(2, 100, 12, 4, 72)  # 144-byte heads: 16-byte words divide them
    chosen = plan(table, "bf16", untuned)
    kernel = table.fallback.kernels["bf16"][-1 - chosen.kernel]
    assert chosen.row == -1 and kernel.config_key == variants.Config.of("warp_per_head", **WPH).key
    assert (chosen.grid, chosen.block) == (-(-(200 * 20) // WPH["warps"]), 32 * WPH["warps"])
    # 66-byte heads: no vector divides them, so the class's chain ends in gather
    odd = plan(table, "fp16", Shape(1, 3, 2, 1, 33))
    assert odd.row == -1 and table.fallback.kernels["fp16"][-1 - odd.kernel].config_key.startswith("gather[")


def build_harness(header_text: str, directory: Path, prelude: str = "") -> Path:
    """The harness built with nvcc against `header_text` (`prelude`: code before it, in the
    same translation unit, as llm.c's own definitions come before its #include)."""
    (directory / "repkv_tuned.cuh").write_text(header_text)
    source = directory / "harness.cu"
    source.write_text(f'{prelude}\n#include "{HARNESS}"\n')
    binary = directory / "harness"
    nvcc = _nvcc()
    assert nvcc is not None
    lib = Path(nvcc).parent.parent / "lib"
    # the harness only plans here (--plan, no GPU): every kernel is compiled to PTX, unoptimized
    # (ptxas, half the build, is left out: the NVRTC check assembles every kernel of the space
    # for sm_90 and sm_80, and the GPU harness builds its own for the device)
    build = [nvcc, "-O1", "-Xcicc=-O0", "-std=c++17", "-arch=compute_90", f"-I{directory}"]
    build += [str(source), "-o", str(binary)]
    subprocess.run([*build, f"-L{lib}"], check=True, capture_output=True, timeout=600)
    return binary


def untuned_layouts() -> list[Shape]:
    """Layouts without rows, one per (nrep, HD) class and beyond: odd HD, MQA at nrep 128, nrep 1."""
    return [
        *[Shape(3, 5, 12, 4, 72), Shape(1, 1, 2, 1, 33), Shape(4096, 16384, 32, 8, 128)],
        *[Shape(2, 300, 128, 1, 64), Shape(1, 77, 24, 24, 80), Shape(3, 9, 40, 5, 192)],
        *[Shape(1, 1000, 56, 8, 96), Shape(2, 33, 12, 6, 256), Shape(1, 5, 6, 3, 40), Shape(2, 7, 4, 2, 6)],
    ]


def check_dispatch(binary: Path, table, cases: dict[str, list[Shape]]) -> None:
    """The compiled dispatcher of the table's op decides as `plan` does, shape by shape."""
    for dtype, shapes in cases.items():
        args = [f"{s.B},{s.T},{s.NH},{s.NH_KV},{s.HD}" for s in shapes]
        argv = [str(binary), "--plan", "--op", table.op, dtype, *args]
        out = subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60).stdout.splitlines()
        assert len(out) == len(shapes)
        for shape, line in zip(shapes, out, strict=True):
            fields = dict(part.split("=") for part in line.split()[6:])
            expected = plan(table, dtype, shape)
            got = (int(fields["kernel"]), int(fields["row"]), int(fields["grid"]), int(fields["block"]))
            assert got == (expected.kernel, expected.row, expected.grid, expected.block), (
                table.op,
                dtype,
                shape,
            )


def random_cases(table, rng: random.Random, per_layout: int = 15) -> dict[str, list[Shape]]:
    """Per dtype: random B*T at each tuned layout of the table, then the untuned layouts."""
    cases: dict[str, list[Shape]] = {dtype: [] for dtype in variants.DTYPES}
    for dtype, nh, nh_kv, hd in sorted({(r.dtype, r.NH, r.NH_KV, r.HD) for r in table.rows}):
        cases[dtype] += [
            Shape(rng.randint(1, 64), rng.randint(1, 8192), nh, nh_kv, hd) for _ in range(per_layout)
        ]
    for dtype in cases:
        cases[dtype] += untuned_layouts()
    return cases


@pytest.mark.skipif(_nvcc() is None, reason="nvcc not installed (pip install nvidia-cuda-nvcc)")
def test_the_header_compiles_and_dispatches_as_specified(tmp_path: Path) -> None:
    index = build_index(load_results(bundled_results_dir())[0])
    export = export_header(index, "h200")
    assert len(export.tables["repkv_backward"].rows) == len(export_table(index, "h200").rows) > 0
    binary = build_harness(render_header(export), tmp_path)
    rng = random.Random(1)
    for table in export.tables.values():  # the other ops: no rows in the bundled store, generic
        check_dispatch(binary, table, random_cases(table, rng))
    bad = subprocess.run([str(binary), "--plan", "bf16", "8,1024,30,8,128"], capture_output=True, text=True)
    assert bad.returncode == 2 and "bad shape" in bad.stderr
