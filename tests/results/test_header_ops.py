"""The header of every op: per-op tables from per-op rows, the generic chains of ops without
rows (held to their families' own rules), the helper code emitted once, llm.c's four entry
points with their exact parameter lists, and (nvcc, no GPU) a multi-op header compiled in an
llm.c-like translation unit, its dispatchers checked against `plan` op by op."""

from __future__ import annotations

import json
import random
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from test_header import HARNESS, _nvcc, build_harness, check_dispatch, random_cases
from trial_rows import S1, S2, VEC16, trial

import variants
from results.header import NO_KERNEL, export_header, plan
from results.header_fallback import (
    _PROBE,
    _PROBE_WIDE,
    NotLayoutFree,
    fallback_plan,
    fallback_table,
    generic_kernel,
)
from results.header_fallback import cells as layout_rule_cells
from results.header_render import kernel_sources, render_header
from results.index import build_index
from results.recipe import GRID_LIMIT
from variants import Shape
from variants.family import COMMON_HEADER
from variants.rope_repkv_forward.rope import ROPE_HEADER

NAIVE128 = {"block": 128}
KERNEL = re.compile(r"__global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\(")
VEC8 = {**VEC16, "vec_bytes": 8}
NEW_OPS = ("repkv_forward", "rope_repkv_forward", "repkv_rope_backward")

# llm.c's parameter lists (llmc/repkv.cuh, branch llama3; the fused pair after rope.cuh's),
# floatX the element type; top-level const (llm.c's `const int B`) is no part of a C++ signature.
_POINTERS = {
    "repkv_forward": "floatX* out, const floatX* inp",
    "repkv_backward": "floatX* dinp, const floatX* dout",
    "rope_repkv_forward": "floatX* out, const floatX* inp, const floatX* freqs_cis",
    "repkv_rope_backward": "floatX* dinp, const floatX* dout, const floatX* freqs_cis",
}
LLMC_SIGNATURES = {
    name: f"{pointers}, int B, int T, int NH, int NH_KV, int HD, cudaStream_t stream"
    for name, pointers in _POINTERS.items()
}


def multi_op_index():
    S3 = Shape(2, 512, 16, 4, 64)
    rows = [
        trial("h100", S1, "bf16", "vec", VEC16, 0.10, number=0),
        trial("h100", S1, "bf16", "vec", VEC16, 0.05, number=1, op="repkv_forward"),
        trial("h100", S1, "bf16", "replicate", VEC8, 0.04, number=2, op="repkv_forward"),
        trial("h100", S2, "fp32", "naive", NAIVE128, 0.30, number=3, op="repkv_forward"),
        trial("h100", S1, "bf16", "replicate", VEC16, 0.06, number=4, op="rope_repkv_forward"),
        trial("h100", S3, "fp16", "naive", NAIVE128, 0.20, number=5, op="rope_repkv_forward"),
        trial("h100", S1, "bf16", "vec", VEC8, 0.07, number=6, op="repkv_rope_backward"),
        trial("h100", S3, "bf16", "naive", {"block": 256}, 0.09, number=7, op="repkv_rope_backward"),
    ]
    return build_index(pd.DataFrame(rows))


def backward_only_index():
    return build_index(pd.DataFrame([trial("h100", S1, "bf16", "vec", VEC16, 0.10)]))


def test_each_op_gets_the_table_of_its_own_rows() -> None:
    export = export_header(multi_op_index(), "h100")
    assert list(export.tables) == list(variants.OPS)
    got = {op: [(r.dtype, r.tuned_shape, r.family) for r in t.rows] for op, t in export.tables.items()}
    assert got == {
        "repkv_backward": [("bf16", S1.key, "vec")],
        "repkv_forward": [("fp32", S2.key, "naive"), ("bf16", S1.key, "replicate")],
        "rope_repkv_forward": [
            ("fp16", "B=2,T=512,NH=16,NH_KV=4,HD=64", "naive"),
            ("bf16", S1.key, "replicate"),
        ],
        "repkv_rope_backward": [("bf16", "B=2,T=512,NH=16,NH_KV=4,HD=64", "naive"), ("bf16", S1.key, "vec")],
    }
    forward = export.tables["repkv_forward"]
    assert (
        forward.source_hashes["replicate"] == variants.get_op("repkv_forward").family("replicate").source_hash
    )
    # a tuned layout at another B*T: the op's own row, its grid terms (replicate: a thread per inp word)
    chosen = plan(forward, "bf16", Shape(3, 1000, 32, 8, 128))
    assert chosen.row == 1 and chosen.block == 256 and chosen.grid == -(-3000 * 48 * 128 * 2 // 8 // 256)
    # JSON lists the tables per op
    body = json.loads(export.as_json())
    assert (
        list(body["ops"]) == list(variants.OPS)
        and body["ops"]["repkv_forward"]["rows"][1]["family"] == "replicate"
    )


def test_an_op_without_rows_is_served_by_its_generic_chain() -> None:
    export = export_header(backward_only_index(), "h100")
    for op in NEW_OPS:
        table = export.tables[op]
        assert table.rows == () and table.op == op
        keys = [k.config_key for k in table.fallback.kernels["bf16"]]
        assert keys[-1] == "naive[block=128]" and all(k.startswith("vec[block=256,") for k in keys[:-1])
        first = table.fallback.kernels["bf16"][-1 - plan(table, "bf16", Shape(1, 64, 32, 8, 128)).kernel]
        assert first.config_key == "vec[block=256,load=plain,store=plain,vec_bytes=16]"
        six = table.fallback.kernels["bf16"][-1 - plan(table, "bf16", Shape(1, 64, 4, 2, 6)).kernel]
        assert six.config.values["vec_bytes"] == 4  # the widest word that divides 6 bf16 elements
        odd = plan(table, "bf16", Shape(1, 64, 4, 2, 33))
        if op == "repkv_forward":
            assert table.fallback.kernels["bf16"][-1 - odd.kernel].config_key == "naive[block=128]"
        else:  # RoPE rotates pairs: no kernel takes an odd HD (the entry point refuses it)
            assert odd.kernel == NO_KERNEL
    # fp32 RoPE words hold whole pairs: no 4-byte vec
    assert [k.width for k in export.tables["rope_repkv_forward"].fallback.kernels["fp32"]] == [16, 8, 4]
    assert export.tables["rope_repkv_forward"].fallback.kernels["fp32"][-1].align == 8
    assert "repkv_rope_backward: no tuned shapes" in render_header(export)


@pytest.mark.parametrize("op_name", list(variants.OPS))
def test_generic_kernels_serve_exactly_where_their_family_does(op_name: str) -> None:
    """`GenericKernel.grid` (what the C dispatcher computes) against the family's own reject
    and launch, shapes past 2^31 elements included (naive's 32-bit indices)."""
    op = variants.get_op(op_name)
    table = (
        fallback_table((), op)
        if op_name != variants.DEFAULT_OP
        else export_header(backward_only_index(), "h100").tables[op_name].fallback
    )
    rng = random.Random(op_name)
    shapes = [_PROBE, Shape(1, 1, 2, 1, 33), Shape(8, 1024, 32, 8, 128), Shape(1, 2**21, 32, 8, 128)]
    shapes += [
        Shape(rng.randint(1, 64), rng.randint(1, 4096), 4 * k, k, rng.randint(1, 160)) for k in (1, 2, 8)
    ]
    for name, dtype in variants.DTYPES.items():
        for kernel in table.kernels[name]:
            family = op.family(kernel.config.family)
            for shape in shapes:
                served = family.rejection(shape, dtype, kernel.config) is None
                launch = family.geometry(shape, dtype, kernel.config, 132) if served else None
                if launch is not None and launch.grid > GRID_LIMIT:
                    served = False
                grid = kernel.grid(shape, dtype)
                assert (grid is not None) == served, (kernel.config_key, name, shape)
                if served:
                    assert (grid, kernel.block) == (launch.grid, launch.block), (
                        kernel.config_key,
                        name,
                        shape,
                    )
                    if not kernel.index32:  # the 64-bit instantiation serves every B*T
                        assert (
                            kernel.name_expression.endswith("long long>") or "<" not in kernel.name_expression
                        )


@pytest.mark.parametrize("op_name", list(variants.OPS))
def test_every_layout_free_configuration_has_the_grid_its_family_launches(op_name: str) -> None:
    """`generic_kernel` reads a kernel's grid terms off its family at probe layouts: for a sample
    of every layout-free family's space, the grid it computes for other layouts is the family's."""
    op = variants.get_op(op_name)
    rng = random.Random(op_name)
    shapes = [Shape(8, 1024, 32, 8, 128), Shape(3, 77, 71, 1, 64), Shape(2, 50, 16, 16, 256)]
    shapes += [
        Shape(rng.randint(1, 8), rng.randint(1, 2048), 5 * k, k, 2 * rng.randint(1, 80)) for k in (1, 3)
    ]
    for family_name in op.layout_free_families:
        family = op.family(family_name)
        space = list(family.space())
        for name, dtype in variants.DTYPES.items():
            for config in rng.sample(space, min(12, len(space))):
                if family.rejection(_PROBE, dtype, config) or family.rejection(_PROBE_WIDE, dtype, config):
                    continue
                kernel = generic_kernel(config, dtype, op)
                for shape in shapes:
                    if family.rejection(shape, dtype, config) is not None:
                        continue
                    launch = family.geometry(shape, dtype, config, 132)
                    assert (kernel.grid(shape, dtype), kernel.block) == (launch.grid, launch.block), (
                        config.key,
                        name,
                        shape,
                    )
    compiled = next(f for f in op.families.values() if not f.layout_free)  # flat, split, tile...
    with pytest.raises(NotLayoutFree, match="compiles the head layout in"):
        generic_kernel(next(iter(compiled.space())), variants.DTYPES["bf16"], op)


@pytest.mark.parametrize("op_name", ["repkv_backward", "repkv_rope_backward"])
def test_a_warp_sum_runtime_kernel_serves_where_a_heads_words_divide_a_warp(op_name: str) -> None:
    """warp_sum_runtime reads the layout at run time, but a warp still holds whole heads: the
    dispatcher's `warp` check refuses a layout whose head is not a divisor of 32 words."""
    op = variants.get_op(op_name)
    family = op.family("warp_sum_runtime")
    shapes = [Shape(2, 9, 48, 1, 128), Shape(2, 9, 71, 1, 64), Shape(2, 9, 8, 1, 256), Shape(2, 9, 24, 2, 96)]
    shapes += [Shape(2, 9, 16, 1, 80), Shape(2, 9, 8, 8, 32), Shape(2, 9, 10, 1, 8)]
    refused = 0
    for name, dtype in variants.DTYPES.items():
        for config in random.Random(op_name).sample(list(family.space()), 16):
            if family.rejection(_PROBE, dtype, config):
                continue
            kernel = generic_kernel(config, dtype, op)
            assert kernel.warp
            for shape in shapes:
                served = family.rejection(shape, dtype, config) is None
                assert (kernel.grid(shape, dtype) is not None) == served, (config.key, name, shape)
                words = shape.HD * dtype.itemsize // kernel.width
                refused += not served and (shape.HD * dtype.itemsize) % kernel.width == 0 and 32 % words != 0
    assert refused  # HD 96 and 80 in 16-byte words: 12 and 10 words a head
    assert not generic_kernel(
        next(iter(op.family("split_runtime").space())), variants.DTYPES["bf16"], op
    ).warp


def test_repkv_backward_copies_where_nothing_is_replicated() -> None:
    """NH == NH_KV: dinp is dout element for element, so the entry point copies on the stream."""
    text = render_header(export_header(multi_op_index(), "h100"))
    entry = text[text.index("inline void repkv_backward(") :]
    entry = entry[: entry.index("\n}\n")]
    assert "if (NH == NH_KV)" in entry
    assert "cudaMemcpyAsync(dinp, dout, bytes, cudaMemcpyDeviceToDevice, stream)" in entry


def test_shared_helper_code_is_emitted_once_and_kernel_names_are_distinct() -> None:
    text = render_header(export_header(multi_op_index(), "h100"))
    common = [line for line in COMMON_HEADER.read_text().splitlines() if line.startswith("template <")]
    for line in [*common, "__device__ __forceinline__ void rope_rotate(float (&x)[Vec<T, VEC_BYTES>::N],"]:
        assert text.count(line) == 1, line
    kernels = KERNEL.findall(text)
    assert len(kernels) == len(set(kernels)) and {
        "repkv_vec",
        "repkv_forward_vec",
        "rope_repkv_forward_vec",
    } <= set(kernels)
    assert {"repkv_rope_backward_naive", "rope_repkv_forward_replicate", "repkv_forward_replicate"} <= set(
        kernels
    )
    # every family of every op, as one translation unit: helpers first, each file once
    families = [f for op in variants.OPS.values() for f in op.families.values()]
    everything = kernel_sources(families)
    assert everything.count("rope_word(typename") == 1  # rope.cuh's definition, once
    # a family instantiating another's template (warp_sum_runtime) shares its kernel and file
    assert sorted(KERNEL.findall(everything)) == sorted({f.kernel for f in families})
    assert everything.index("struct Vec {") < everything.index("rope_rotate")
    assert ROPE_HEADER.read_text().splitlines()[0] in everything


def _entry_points(text: str) -> dict[str, list[str]]:
    """Each global `inline void NAME(...)` after the namespace, its parameter lists."""
    tail = text[text.index("}  // namespace repkv_tuned") :]
    found: dict[str, list[str]] = {}
    for name, params in re.findall(r"inline void (\w+)\(([^)]*)\)", tail):
        found.setdefault(name, []).append(" ".join(params.split()))
    return found


def test_the_four_entry_points_take_llmcs_parameter_lists() -> None:
    for index in (multi_op_index(), backward_only_index()):
        found = _entry_points(render_header(export_header(index, "h100")))
        assert set(found) == set(LLMC_SIGNATURES)
        for name, signature in LLMC_SIGNATURES.items():
            assert found[name][0] == signature
        # the stream-less overload of repkv_backward the header always had: a different arity
        assert found["repkv_backward"][1:] == [
            signature.rsplit(", cudaStream_t", 1)[0] for signature in [LLMC_SIGNATURES["repkv_backward"]]
        ]
        assert all(len(v) == 1 for k, v in found.items() if k != "repkv_backward")


# llm.c's definitions come first (floatX, the stream), then its call sites, verbatim from
# train_llama3.cu (branch llama3, lines 719-721 and 924-926) and with the fused pair.
LLMC_TRANSLATION_UNIT = """\
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <type_traits>
typedef __nv_bfloat16 floatX;
"""
LLMC_CALLS = """
void llmc_forward(floatX* qkv_rep_scratch, floatX* scratch, floatX* freqs_cis, int B, int T, int n_head,
                  int n_kv_head, int hd, cudaStream_t main_stream) {
    repkv_forward(qkv_rep_scratch, scratch, B, T, n_head, n_kv_head, hd, main_stream);
    rope_repkv_forward(qkv_rep_scratch, scratch, freqs_cis, B, T, n_head, n_kv_head, hd, main_stream);
}
void llmc_backward(floatX* dl_bt4c2, floatX* dl_bt4c, floatX* freqs_cis, const int B, const int T,
                   const int NH, int n_kv_head, int hd, cudaStream_t main_stream) {
    repkv_backward(dl_bt4c2, dl_bt4c, B, T, NH, n_kv_head, hd, main_stream);
    repkv_rope_backward(dl_bt4c2, dl_bt4c, freqs_cis, B, T, NH, n_kv_head, hd, main_stream);
}
using Fwd = void (*)(floatX*, const floatX*, int, int, int, int, int, cudaStream_t);
using Rope = void (*)(floatX*, const floatX*, const floatX*, int, int, int, int, int, cudaStream_t);
using NoStream = void (*)(floatX*, const floatX*, int, int, int, int, int);
static_assert(std::is_same<decltype(&repkv_forward<floatX>), Fwd>::value, "repkv_forward");
static_assert(std::is_same<decltype(&rope_repkv_forward<floatX>), Rope>::value, "rope_repkv_forward");
static_assert(std::is_same<decltype(&repkv_rope_backward<floatX>), Rope>::value, "repkv_rope_backward");
Fwd backward_with_stream = &repkv_backward<floatX>;  // an overload of exactly each type
NoStream backward_without_stream = &repkv_backward<floatX>;
"""


@pytest.mark.skipif(_nvcc() is None, reason="nvcc not installed (pip install nvidia-cuda-nvcc)")
def test_a_multi_op_header_compiles_in_llmcs_unit_and_dispatches_every_op(tmp_path: Path) -> None:
    export = export_header(multi_op_index(), "h100")
    text = render_header(export) + LLMC_CALLS
    binary = build_harness(text, tmp_path, prelude=LLMC_TRANSLATION_UNIT)
    rng = random.Random(2)
    for table in export.tables.values():
        check_dispatch(binary, table, random_cases(table, rng, per_layout=8))


@pytest.mark.gpu
@pytest.mark.skipif(_nvcc() is None, reason="nvcc not installed (pip install nvidia-cuda-nvcc)")
def test_every_entry_point_validates_against_the_float64_reference_on_the_gpu(tmp_path: Path) -> None:
    """The harness on the GPU: each op's tuned rows and generic kernels, every dtype, checked
    element by element against its CPU reference (NaN-poisoned output)."""
    export = export_header(multi_op_index(), "h100")
    (tmp_path / "repkv_tuned.cuh").write_text(render_header(export))
    nvcc = _nvcc()
    assert nvcc is not None
    binary = tmp_path / "harness"
    build = [nvcc, "-O2", "-std=c++17", "-arch=native", "-Xcompiler", "-fopenmp", f"-I{tmp_path}"]
    subprocess.run([*build, str(HARNESS), "-o", str(binary)], check=True, capture_output=True, timeout=600)
    shapes = ["8,1024,32,8,128", "2,512,16,4,64", "1,77,24,24,80", "2,7,4,2,6", "1,5,6,3,40", "3,100,8,1,128"]
    for op in variants.OPS:
        extra = ["1,3,4,2,33"] if op in ("repkv_backward", "repkv_forward") else []  # odd HD: no RoPE
        for dtype in variants.DTYPES:
            run = subprocess.run(
                [str(binary), "--op", op, dtype, *shapes, *extra], capture_output=True, text=True, timeout=600
            )
            assert run.returncode == 0, (op, dtype, run.stdout, run.stderr)
            assert run.stdout.count("| ok |") == len(shapes) + len(extra), run.stdout


def test_an_mha_only_kernel_is_tried_in_the_nrep_1_class_alone() -> None:
    """The fused backward's rotate_runtime rejects nrep > 1 while its grid (all the C table
    knows of it) fits any layout: the header is safe because only the nrep-1 class tries it.
    Fitted on MHA and GQA rows where it is the fastest at MHA."""
    mha, gqa = Shape(4, 1024, 32, 32, 128), Shape(4, 1024, 32, 8, 128)
    rotate = {"block": 128, "vec_bytes": 16, "words": 2, "load": "plain", "store": "plain"}
    split = {
        "block": 256,
        "vec_bytes": 16,
        "items": 4,
        "group": 8,
        "kv_items": 1,
        "load": "plain",
        "store": "plain",
    }
    op = "repkv_rope_backward"
    rows = [
        trial("h100", mha, "bf16", "rotate_runtime", rotate, 0.050, number=0, op=op),
        trial("h100", mha, "bf16", "vec", VEC16, 0.060, number=1, op=op),
        trial("h100", gqa, "bf16", "split_runtime", split, 0.040, number=2, op=op),
        trial("h100", gqa, "bf16", "vec", VEC16, 0.055, number=3, op=op),
    ]
    table = fallback_table(build_index(pd.DataFrame(rows)).for_op(op).groups_of("h100"), variants.get_op(op))
    kernels = table.kernels["bf16"]
    rotating = {n for n, k in enumerate(kernels) if k.config.family == "rotate_runtime"}
    assert rotating  # the MHA class's pick
    for cell in layout_rule_cells():
        tried = set(table.tries("bf16", cell))
        assert bool(tried & rotating) == (cell[0] == 0), cell  # NREP_CLASSES[0] is nrep 1 alone
    bf16 = variants.DTYPES["bf16"]
    for shape in (Shape(3, 77, 12, 12, 96), Shape(1, 5, 40, 8, 128), Shape(2, 9, 16, 1, 64)):
        chosen = fallback_plan(table, bf16, shape)
        assert chosen is not None
        family = kernels[chosen[0]].config.family
        assert (family == "rotate_runtime") == (shape.nrep == 1), shape
        assert variants.get_op(op).family(family).rejection(shape, bf16, kernels[chosen[0]].config) is None
