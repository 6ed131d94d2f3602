"""repkv_forward (llm.c's `repkv_forward`), on the CPU: the float64 reference against llm.c's
index math, the validator's exactness, the families' rules and launches, and (where NVRTC is
installed) a sample of kernels compiled for sm_90."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tuner.cli.check import CHECK_SHAPES
from variants import nvrtc
from variants.dtypes import DTYPES
from variants.family import MAX_GRID, Config, ceil_div, grid_size
from variants.reference import decode, encode, random_values, validate_output
from variants.repkv_forward import OP
from variants.repkv_forward.layout import out_numel
from variants.shape import INT32_MAX, MAX_ELEMENTS, Shape

try:
    nvrtc.nvrtc_version()
    NO_NVRTC = ""
except nvrtc.NvrtcUnavailable as exc:  # pragma: no cover - CI installs the nvrtc extra
    NO_NVRTC = str(exc)
needs_nvrtc = pytest.mark.skipif(bool(NO_NVRTC), reason=NO_NVRTC or "NVRTC is installed")

NAIVE, VEC, REPLICATE = (OP.families[name] for name in ("naive", "vec", "replicate"))
FP32, BF16, FP16 = DTYPES["fp32"], DTYPES["bf16"], DTYPES["fp16"]
SEED = Shape(8, 1024, 32, 8, 128)
# out has 2^31 + 2^30 elements: the long long path (and past naive's int indices)
HUGE = Shape(2, 65536, 64, 8, 128)
# MQA with odd HD, MHA (nrep 1), nrep 3, 5 and 7 with odd HD and odd token counts
SMALL_SHAPES = (
    Shape(1, 3, 5, 1, 3),
    Shape(2, 3, 3, 3, 5),
    Shape(3, 1, 6, 2, 7),
    Shape(1, 5, 10, 2, 1),
    Shape(2, 2, 14, 2, 3),
)


def llmc_forward(inp: np.ndarray, shape: Shape) -> np.ndarray:
    """llm.c's repkv_forward_kernel1, element by element: decode out's flat index, gather."""
    B, N, NH, HD = shape.B, shape.T, shape.NH, shape.HD
    replicate_factor = shape.nrep
    nh_total = NH + 2 * (NH // replicate_factor)
    out = np.full(B * N * 3 * NH * HD, np.nan)
    for idx_flat in range(out.size):
        idx = idx_flat
        d = idx % HD
        idx //= HD
        nh = idx % NH
        idx //= NH
        c = idx % 3
        idx //= 3
        n = idx % N
        b = idx // N
        row = b * N * nh_total * HD + n * nh_total * HD
        if c == 0:
            inp_idx = row + nh * HD + d
        elif c == 1:
            inp_idx = row + NH * HD + (nh // replicate_factor) * HD + d
        else:
            inp_idx = row + NH * HD + (NH // replicate_factor) * HD + (nh // replicate_factor) * HD + d
        out[idx_flat] = inp[inp_idx]
    return out


def reference_out(inp: np.ndarray, shape: Shape) -> np.ndarray:
    rows = np.asarray(inp, dtype=np.float64).reshape(shape.tokens, -1)
    return np.asarray(OP.reference([rows], shape, np.arange(shape.tokens) % shape.T, np)).ravel()


@pytest.mark.parametrize("shape", SMALL_SHAPES, ids=str)
def test_the_reference_is_llmc_index_math(shape: Shape) -> None:
    inp = np.random.default_rng(0).standard_normal(shape.dinp_numel)
    expected = llmc_forward(inp, shape)
    got = reference_out(inp, shape)
    assert got.shape == (out_numel(shape),) and np.array_equal(got, expected)


def test_the_op_describes_llmc_repkv_forward() -> None:
    assert list(OP.families) == ["naive", "vec", "replicate", "flat"]
    assert OP.baseline == Config.of("naive", block=128)
    assert OP.kernel_arguments == "(T* out, const T* inp, int B, int T, int NH, int NH_KV, int HD)"
    assert all(f.kernel == f"repkv_forward_{f.name}" for f in OP.families.values())
    assert all(f.template_path.parent.name == "repkv_forward" for f in OP.families.values())
    assert OP.tolerance(BF16, SEED, 123.0) == (0.0, 0.0)
    assert OP.bytes_moved(SEED, BF16) == (SEED.tokens * (48 + 96) * 128) * 2


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=lambda d: d.name)
def test_validate_output_accepts_the_copy_and_names_a_swapped_replica(dtype) -> None:
    shape = Shape(2, 3, 6, 2, 5)  # nrep 3
    inp = random_values(shape.dinp_numel, dtype, np, seed=1)
    exact = encode(llmc_forward(decode(inp, dtype), shape), dtype)
    result = validate_output(exact, inp, shape, dtype, np, op=OP)
    assert result.ok and result.checked == out_numel(shape) and (result.atol, result.rtol) == (0, 0)
    # token by token (chunks of one token), the same verdict
    assert validate_output(exact, inp, shape, dtype, np, chunk_elements=1, op=OP).ok

    # out[b=1, t=2, 1, h=4] takes K head 0 instead of K head 4 // 3 = 1
    wrong = exact.reshape(shape.B, shape.T, 3, shape.NH, shape.HD).copy()
    values = inp.reshape(shape.B, shape.T, shape.heads_in, shape.HD)
    wrong[1, 2, 1, 4] = values[1, 2, shape.NH + 0]
    differs = decode(values[1, 2, shape.NH + 0], dtype) != decode(values[1, 2, shape.NH + 1], dtype)
    result = validate_output(wrong, inp, shape, dtype, np, chunk_elements=7, op=OP)
    assert result.bad == int(differs.sum()) > 0
    assert [(m.b, m.t, m.head, m.d) for m in result.first] == [
        (1, 2, shape.NH + 4, d) for d in np.flatnonzero(differs)
    ]
    assert all(m.tensor == "out" for m in result.first)
    assert "out[b=1,t=2,head=10," in result.summary()

    # a single wrong bit, or a NaN, never passes
    off = exact.copy()
    off.view(f"u{dtype.itemsize}")[17] ^= 1
    assert validate_output(off, inp, shape, dtype, np, op=OP).bad == 1
    poisoned = exact.copy()
    poisoned[-1] = encode(np.array([np.nan]), dtype)[0]
    (mismatch,) = validate_output(poisoned, inp, shape, dtype, np, op=OP).first
    assert (mismatch.b, mismatch.t, mismatch.head, mismatch.d) == (1, 2, 3 * shape.NH - 1, shape.HD - 1)


def test_vector_widths_must_divide_hd() -> None:
    def widths(shape: Shape, dtype) -> list[int]:
        return [
            v
            for v in (4, 8, 16)
            if VEC.rejection(
                shape, dtype, Config.of("vec", block=128, vec_bytes=v, load="ldg", store="plain")
            )
            is None
        ]

    assert widths(Shape(1, 4, 6, 2, 6), FP32) == [4, 8]
    assert widths(Shape(1, 4, 6, 2, 6), BF16) == [4]
    assert widths(Shape(1, 4, 6, 2, 3), FP32) == [4]
    assert widths(Shape(1, 4, 6, 2, 3), FP16) == []
    assert widths(Shape(1, 4, 6, 2, 80), BF16) == [4, 8, 16]
    reason = REPLICATE.rejection(
        Shape(1, 4, 6, 2, 3), BF16, Config.of("replicate", block=64, vec_bytes=4, load="plain", store="stcs")
    )
    assert reason and "not divisible by the vector width 2" in reason


def test_naive_keeps_llmc_int_indices() -> None:
    config = Config.of("naive", block=128)
    assert NAIVE.rejection(SEED, BF16, config) is None
    reason = NAIVE.rejection(HUGE, BF16, config)
    assert reason and "2^31" in reason
    assert not NAIVE.valid_configs(HUGE, FP32)
    # the largest token count whose out (rounded up to whole blocks) stays within int
    per_token = 3 * 8 * 64
    tokens = INT32_MAX // per_token // 128 * 128
    edge = Shape(1, tokens, 8, 2, 64)
    assert NAIVE.rejection(edge, FP16, config) is None
    assert NAIVE.rejection(Shape(1, tokens + 128, 8, 2, 64), FP16, config)


def test_word_families_keep_the_grid_within_cuda() -> None:
    # inp just under MAX_ELEMENTS; out is 192/66 times larger
    largest = Shape(992, 65536, 64, 1, 128)
    assert largest.dinp_numel <= MAX_ELEMENTS
    for family in (VEC, REPLICATE):
        narrow = Config.of(family.name, block=32, vec_bytes=4, load="plain", store="plain")
        wide = Config.of(family.name, block=1024, vec_bytes=4, load="plain", store="plain")
        assert "exceed CUDA's grid" in family.rejection(largest, FP32, narrow)
        assert family.rejection(largest, FP32, wide) is None
        assert family.geometry(largest, FP32, wide, 132).grid <= MAX_GRID
        assert family.name_expression(largest, FP32, wide).endswith("long long>")


LAUNCH_SHAPES = (*CHECK_SHAPES, *SMALL_SHAPES, Shape(7, 9, 12, 4, 40))


def test_launch_and_grid_terms_agree_and_cover_every_thread() -> None:
    checked = 0
    for shape in LAUNCH_SHAPES:
        for dtype in DTYPES.values():
            for family in OP.families.values():
                for config in family.valid_configs(shape, dtype):
                    p = config.values
                    launch = family.geometry(shape, dtype, config, 132)
                    terms = family.grid_terms(shape, dtype, p)
                    assert grid_size(terms, shape.tokens) == launch.grid, (shape, config)
                    assert launch.block == p["block"] and 0 < launch.grid <= MAX_GRID
                    # one thread per element (naive), per out word (vec), per inp word (replicate),
                    # per `words` inp words (flat)
                    elements = out_numel(shape) if family.name in ("naive", "vec") else shape.dinp_numel
                    words = elements * dtype.itemsize // p.get("vec_bytes", dtype.itemsize)
                    threads = ceil_div(words, p.get("words", 1))
                    assert launch.grid == ceil_div(threads, launch.block)
                    checked += 1
    assert checked > 3000


def all_expressions(shapes=CHECK_SHAPES) -> dict[str, list[str]]:
    """Every valid configuration's name expression, per family, over shapes x dtypes."""
    found: dict[str, list[str]] = {name: [] for name in OP.families if name != "flat"}
    for shape in shapes:
        for dtype in DTYPES.values():
            for family in OP.families.values():
                if family.name == "flat":  # the head layout compiled in: test_layout_family
                    continue
                found[family.name] += [
                    family.name_expression(shape, dtype, c) for c in family.valid_configs(shape, dtype)
                ]
    return found


def test_one_configuration_is_one_kernel_at_every_shape() -> None:
    found = all_expressions()
    distinct = {name: set(exprs) for name, exprs in found.items()}
    total = sum(len(d) for d in distinct.values())
    print(
        f"repkv_forward: {sum(map(len, found.values()))} configurations, {total} distinct kernels: "
        + ", ".join(f"{n} {len(d)}" for n, d in distinct.items())
    )
    assert total < 300
    # naive: one per dtype; vec and replicate: dtype x 3 widths x 3 loads x 2 stores x 2 index types
    assert {n: len(d) for n, d in distinct.items()} == {"naive": 3, "vec": 108, "replicate": 108}
    # the block never reaches the template; the index type is int below 2^31, long long above
    assert {e for e in distinct["vec"] if e.endswith("long long>")} == {
        VEC.name_expression(HUGE, dtype, c)
        for dtype in DTYPES.values()
        for c in VEC.valid_configs(HUGE, dtype)
    }
    seed = Config.of("replicate", block=256, vec_bytes=16, load="ldg", store="stcs")
    assert {REPLICATE.name_expression(s, BF16, seed) for s in CHECK_SHAPES[:-1] if s.HD % 8 == 0} == {
        "repkv_forward_replicate<__nv_bfloat16, 16, 1, 1, int>"
    }
    assert (
        REPLICATE.name_expression(HUGE, BF16, seed)
        == "repkv_forward_replicate<__nv_bfloat16, 16, 1, 1, long long>"
    )


def sample(shapes=(SEED, HUGE), per_dtype: int = 4) -> dict[str, list[str]]:
    """A few distinct kernels of each family per dtype and shape, spread over its space."""
    picked: dict[str, list[str]] = {name: [] for name in OP.families}
    for shape in shapes:
        for dtype in DTYPES.values():
            for family in OP.families.values():
                exprs = list(
                    dict.fromkeys(
                        family.name_expression(shape, dtype, c) for c in family.valid_configs(shape, dtype)
                    )
                )
                step = max(1, len(exprs) // per_dtype)
                picked[family.name] += [e for e in exprs[::step][:per_dtype] if e not in picked[family.name]]
    return picked


@needs_nvrtc
def test_a_sample_compiles_for_sm_90_without_spills() -> None:
    picked = sample()
    assert any("long long" in e for e in picked["vec"]) and any("int>" in e for e in picked["replicate"])
    for name, expressions in picked.items():
        reports = nvrtc.compile_expressions(OP.families[name], expressions, arch="sm_90")
        assert [r.expression for r in reports] == expressions
        for r in reports:
            assert r.ok, r.error
            assert not r.spills and 0 < r.registers <= 64, r


def global_memory_ops(family_name: str, dtype, config: Config) -> list[str]:
    family = OP.families[family_name]
    (report,) = nvrtc.compile_expressions(
        family, [family.name_expression(SEED, dtype, config)], keep_ptx=True
    )
    assert report.ok and report.ptx, report.error
    return re.findall(r"\b(?:ld|st)\.global[.\w]*", report.ptx)


@needs_nvrtc
@pytest.mark.parametrize("family_name", ["vec", "replicate"])
def test_word_families_move_16_byte_words_with_their_hints(family_name: str) -> None:
    config = Config.of(family_name, block=256, vec_bytes=16, load="ldg", store="stcs")
    ops = set(global_memory_ops(family_name, BF16, config))
    assert {op for op in ops if op.startswith("ld.")} == {"ld.global.nc.v4.u32"}, ops
    stores = {op for op in ops if op.startswith("st.")}
    assert stores and all(op.startswith("st.global.cs.v4") for op in stores), ops


@needs_nvrtc
def test_naive_streams_each_element_with_ldcs() -> None:
    ops = set(global_memory_ops("naive", FP32, Config.of("naive", block=128)))
    assert ops == {"ld.global.cs.f32", "st.global.f32"}, ops
