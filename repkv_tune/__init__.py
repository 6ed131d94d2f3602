"""repkv-tune's Python API: the tuned kernels as PyTorch operators, for training code.

    import repkv_tune
    q, k, v = repkv_tune.repkv(qkv, NH, NH_KV).unbind(2)   # (B, T, 3, NH, HD); both passes tuned
    dinp = repkv_tune.repkv_backward(dout, NH_KV)          # the backward alone; out= to reuse memory
    freqs_cis = repkv_tune.precompute_freqs_cis(HD, T, dtype=qkv.dtype, device=qkv.device)
    q, k, v = repkv_tune.rope_repkv(qkv, freqs_cis, NH, NH_KV).unbind(2)  # RoPE fused in (llm.c's)

The distribution is `repkv-tune`, so `import repkv_tune` is the import a PyTorch user guesses;
the tuner (`tuner`), the results store (`results`) and the service (`service`) stay apart from
it. Importing this package needs torch; CuPy is imported on the first CUDA call.
"""

from __future__ import annotations

TORCH_HINT = "pip install 'repkv-tune[torch,cuda13]' ('repkv-tune[torch,cuda12]' for a CUDA 12 driver)"

try:
    from repkv_tune.ops import record_races, reference_backward, repkv, repkv_backward, served
    from repkv_tune.rope import precompute_freqs_cis, rope_repkv
except ModuleNotFoundError as exc:  # the API's one requirement: said in one line, with the fix
    if exc.name != "torch":
        raise
    raise ModuleNotFoundError(
        f"repkv_tune, the PyTorch operators, needs PyTorch, which is not installed: {TORCH_HINT}",
        name="torch",
    ) from None

__all__ = [
    "precompute_freqs_cis",
    "record_races",
    "reference_backward",
    "repkv",
    "repkv_backward",
    "rope_repkv",
    "served",
]
