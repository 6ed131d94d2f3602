"""repkv backward as a PyTorch user would write it in Triton instead of using this project: one
kernel, `@triton.autotune` over its tile size and warps, keyed on the shape.

    from tuner.runners.gpu.triton_peer import repkv_backward_triton
    repkv_backward_triton(dout, dinp, B, T, NH, NH_KV, HD)   # torch tensors, dinp written

The peers benchmark (`scripts/bench_kernels.py`) and the probes import this module; it needs torch and
triton, never cupy. With TRITON_INTERPRET=1 (set before the import) the kernel runs on CPU
tensors through Triton's interpreter, which is how the tests check it without a GPU.

One program writes a tile of BLOCK_T tokens x one dinp head x HD (padded to BLOCK_D, the next
power of two, and masked):

    head <  NH:  dinp[t, head, :] = dout[t, 0, head, :]                         (a copy)
    head >= NH:  kv = head - NH; which = kv // NH_KV (0 key, 1 value); g = kv % NH_KV
                 dinp[t, head, :] = sum_{r < NREP} dout[t, 1 + which, g*NREP + r, :]

HD and NREP are compile-time constants, so every replica's load is issued before the first
add and the address arithmetic folds; the sum runs in fp32 and is rounded once. Token offsets
are 64-bit (t * 3*NH*HD passes 2^31 on large shapes).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import triton
import triton.language as tl

# (elements per program, warps): BLOCK_T = elements // BLOCK_D tokens per program. Configs
# whose tile is narrower than one head, or leaves threads without a 16-byte vector, are pruned
# per shape (see prune_configs).
TILE_CONFIGS: tuple[tuple[int, int], ...] = (
    (1024, 4),
    (2048, 4),
    (4096, 4),
    (4096, 8),
    (8192, 8),
)

# The autotuner's benchmark: shorter than Triton's default (25 ms warm-up, 100 ms of
# repetitions per config) so that tuning every benchmark shape fits the run; it still
# repeats the fastest kernels hundreds of times and flushes L2 between calls.
BENCH_WARMUP_MS = 10
BENCH_REP_MS = 40


def block_d(HD: int) -> int:
    return triton.next_power_of_2(HD)


def block_t(elements: int, HD: int) -> int:
    return elements // block_d(HD)


def tile_configs() -> list[triton.Config]:
    return [triton.Config({"ELEMS": elements}, num_warps=warps) for elements, warps in TILE_CONFIGS]


def prune_configs(configs: Sequence[triton.Config], named_args: dict[str, Any], **kwargs: Any) -> list:
    """Drop tiles narrower than one head row (BLOCK_T would be 0), tiles whose threads would
    hold less than 16 bytes each, and tiles far taller than the token count; keep at least one."""
    HD = named_args["HD"] if "HD" in named_args else kwargs["HD"]
    tokens = named_args["tokens"]
    itemsize = named_args["dout_ptr"].element_size()
    bd = block_d(HD)
    kept = []
    for config in configs:
        elements = config.kwargs["ELEMS"]
        threads = 32 * config.num_warps
        if elements < bd or elements * itemsize < 16 * threads:
            continue
        if elements // bd > 2 * triton.next_power_of_2(tokens):
            continue
        kept.append(config)
    return kept or [triton.Config({"ELEMS": bd}, num_warps=4)]


@triton.jit
def repkv_backward_kernel(
    dinp_ptr,
    dout_ptr,
    tokens,
    NH,
    NH_KV,
    HD: tl.constexpr,
    NREP: tl.constexpr,
    BLOCK_D: tl.constexpr,
    ELEMS: tl.constexpr,
):
    BLOCK_T: tl.constexpr = ELEMS // BLOCK_D  # >= 1: prune_configs keeps ELEMS >= BLOCK_D
    head = tl.program_id(1)  # dinp head: < NH query, then NH_KV key, then NH_KV value heads
    t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    d = tl.arange(0, BLOCK_D)
    mask = (t[:, None] < tokens) & (d[None, :] < HD)
    t64 = t.to(tl.int64)
    src_row = t64 * (3 * NH * HD)  # dout is (tokens, 3, NH, HD)
    dst_row = t64 * ((NH + 2 * NH_KV) * HD)  # dinp is (tokens, NH + 2*NH_KV, HD)
    dst = dinp_ptr + dst_row[:, None] + head * HD + d[None, :]
    if head < NH:
        x = tl.load(dout_ptr + src_row[:, None] + head * HD + d[None, :], mask=mask)
        tl.store(dst, x, mask=mask)
    else:
        kv = head - NH
        which = kv // NH_KV  # 0: key, 1: value
        g = kv - which * NH_KV
        src = dout_ptr + src_row[:, None] + ((1 + which) * NH + g * NREP) * HD + d[None, :]
        acc = tl.load(src, mask=mask).to(tl.float32)
        for r in tl.static_range(1, NREP):
            acc += tl.load(src + r * HD, mask=mask).to(tl.float32)
        tl.store(dst, acc.to(dinp_ptr.dtype.element_ty), mask=mask)


def _default_bench(kernel_call: Callable[[], None], quantiles: Sequence[float]) -> Any:
    return triton.testing.do_bench(kernel_call, warmup=BENCH_WARMUP_MS, rep=BENCH_REP_MS, quantiles=quantiles)


def make_autotuned(do_bench: Callable[..., Any] | None = None) -> Any:
    """The kernel under `triton.autotune`, keyed on the shape ints (and, as Triton adds, the
    element type). `do_bench(kernel_call, quantiles)` times one config; tests pass a fake."""
    bench = do_bench or _default_bench
    options: dict[str, Any] = {
        "configs": tile_configs(),
        "key": ["tokens", "NH", "NH_KV", "HD", "NREP"],
        "prune_configs_by": {"early_config_prune": prune_configs},
    }
    if "do_bench" in inspect.signature(triton.autotune).parameters:
        options["do_bench"] = bench
    else:  # older Triton: only the benchmark's duration can be set
        options.update(warmup=BENCH_WARMUP_MS, rep=BENCH_REP_MS)
    return triton.autotune(**options)(repkv_backward_kernel)


@functools.cache
def autotuned() -> Any:
    return make_autotuned()


def repkv_backward_triton(
    dout: Any, dinp: Any, B: int, T: int, NH: int, NH_KV: int, HD: int, kernel: Any = None
) -> None:
    """dinp (B, T, NH + 2*NH_KV, HD) <- repkv backward of dout (B, T, 3, NH, HD); both
    contiguous torch tensors of one dtype on one device (a CPU tensor only in the interpreter)."""
    if NH % NH_KV:
        raise ValueError(f"NH={NH} is not divisible by NH_KV={NH_KV}")
    tokens = B * T
    if dout.numel() != tokens * 3 * NH * HD or dinp.numel() != tokens * (NH + 2 * NH_KV) * HD:
        raise ValueError("dout or dinp does not hold the shape's element count")
    if not (dout.is_contiguous() and dinp.is_contiguous()) or dout.dtype != dinp.dtype:
        raise ValueError("dout and dinp must be contiguous and of one dtype")
    kernel = autotuned() if kernel is None else kernel
    bd = block_d(HD)
    heads = NH + 2 * NH_KV

    def grid(meta: dict[str, Any]) -> tuple[int, int]:
        return (triton.cdiv(tokens, block_t(meta["ELEMS"], HD)), heads)

    kernel[grid](dinp, dout, tokens, NH, NH_KV, HD, NH // NH_KV, bd)


def chosen_config(kernel: Any = None) -> str:
    """The config the autotuner picked last, as text (for the benchmark's rows)."""
    kernel = autotuned() if kernel is None else kernel
    config = getattr(kernel, "best_config", None)
    if config is None:
        return ""
    return f"ELEMS={config.kwargs['ELEMS']},num_warps={config.num_warps}"


@triton.jit
def empty_kernel(x):
    """Does nothing: a Triton launch's fixed cost, beside CuPy's (the probes' `empty` sides)."""
    pass
