"""The Triton peer compiled for an H100/H200 (sm_90) without a GPU: its tile configs compile
for head layouts of the benchmark and odd ones, in every dtype, with 128-bit global loads and
stores only (HD=72 and 80 included) and no local memory. Needs a Triton with its NVIDIA
backend (ptxas ships with it)."""

from __future__ import annotations

import importlib
import re

import pytest

triton = pytest.importorskip("triton")

if tuple(int(part) for part in re.findall(r"\d+", triton.__version__)[:2]) < (3, 5):
    pytest.skip("the offline compile API used here is Triton >= 3.5's", allow_module_level=True)


@pytest.fixture(scope="module")
def tp():
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TRITON_INTERPRET", raising=False)
        yield importlib.reload(importlib.import_module("tuner.runners.gpu.triton_peer"))


def compile_sm90(tp, dtype: str, HD: int, nrep: int, elements: int, warps: int):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature = {
        "dinp_ptr": f"*{dtype}",
        "dout_ptr": f"*{dtype}",
        "tokens": "i32",
        "NH": "i32",
        "NH_KV": "i32",
        "HD": "constexpr",
        "NREP": "constexpr",
        "BLOCK_D": "constexpr",
        "ELEMS": "constexpr",
    }
    constants = {"HD": HD, "NREP": nrep, "BLOCK_D": tp.block_d(HD), "ELEMS": elements}
    # the pointers are 16-byte aligned, as Triton specializes them at launch
    attrs = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]}
    try:
        source = ASTSource(
            fn=tp.repkv_backward_kernel, signature=signature, constexprs=constants, attrs=attrs
        )
    except TypeError as exc:
        pytest.skip(f"this Triton's ASTSource differs: {exc}")
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize(("HD", "nrep"), [(128, 4), (64, 7), (256, 2), (80, 1), (72, 3), (160, 8)])
def test_configs_compile_with_16_byte_accesses(tp, dtype: str, HD: int, nrep: int) -> None:
    """The smallest and the largest tile of each layout (every tile of the first)."""
    fitting = [(e, w) for e, w in tp.TILE_CONFIGS if e >= tp.block_d(HD)]
    configs = fitting if (HD, nrep) == (128, 4) else [fitting[0], fitting[-1]]
    for elements, warps in configs:
        ptx = compile_sm90(tp, dtype, HD, nrep, elements, warps).asm["ptx"]
        loads = set(re.findall(r"ld\.global[.\w]*", ptx))
        stores = set(re.findall(r"st\.global[.\w]*", ptx))
        assert loads == {"ld.global.v4.b32"}, (elements, warps, loads)
        assert stores == {"st.global.v4.b32"}, (elements, warps, stores)
        assert "ld.local" not in ptx and "st.local" not in ptx
