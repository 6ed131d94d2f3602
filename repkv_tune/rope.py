"""RoPE fused with the K/V replication, as PyTorch operators: llm.c's `repkv_forward` then
`rope_forward` in one tuned kernel, and its backward (`rope_backward_inplace` then
`repkv_backward`) in another.

    from repkv_tune import precompute_freqs_cis, rope_repkv
    freqs_cis = precompute_freqs_cis(HD, T, dtype=qkv.dtype, device=qkv.device)  # once
    q, k, v = rope_repkv(qkv, freqs_cis, NH, NH_KV).unbind(2)  # (B, T, NH, HD) each

llm.c's convention (`variants.rope_repkv_forward.rope`): freqs_cis is (T, HD) with (cos, sin)
of position t at frequency i in columns (2i, 2i+1); each pair (x0, x1) = (2i, 2i+1) of a query
or key head is rotated to (x0*cos - x1*sin, x0*sin + x1*cos), value heads are not; a token's
position is its index t within its sequence. freqs_cis has qkv's dtype, as llm.c stores it.

`torch.ops.repkv_tune.rope_repkv` and `.repkv_rope_backward` are `torch.library` custom ops
with fake implementations (`torch.compile(fullgraph=True)` traces through them); rope_repkv's
autograd is the fused backward (the gradient of qkv; freqs_cis gets none). On CUDA (fp32,
bf16, fp16) each launches its op's kernel on the current stream (CUDA graph capture works
once a first call compiled it), chosen from the results store for that op as the repkv ops
are (exact, nearest, layout rule, else the op's generic configuration: `vec` at block 256,
`naive` at 128), and raced on a shape nobody tuned (`repkv_tune.race`, as the repkv ops). CPU
and float64 tensors take a plain PyTorch path (the float64 references of `variants`,
written with torch ops: float64 stays float64, other dtypes compute in float32 and round once).
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

import repkv_tune.launcher as _launcher
from repkv_tune.ops import _check, _check_qkv, _counts, _whole, reference_backward, reference_forward

THETA = 500000.0  # Llama 3's rope_theta, llm.c's default


def precompute_freqs_cis(
    HD: int,
    T: int,
    theta: float = THETA,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | int | None = None,
) -> torch.Tensor:
    """llm.c's precompute_freqs_cis(dim=HD, end=T, theta, use_scaled=0), computed in float32 as
    llm.c does on the CPU: (T, HD) with [t, 2i] = cos(t * f_i), [t, 2i+1] = sin(t * f_i), f_i =
    1 / theta^(2i / HD); then cast to `dtype` (pass qkv's) on `device`."""
    hd, t = _whole(HD), _whole(T)
    if hd is None or hd < 2 or hd % 2:
        raise ValueError(f"HD must be a positive even int (RoPE rotates (2i, 2i+1) pairs); got {HD!r}")
    if t is None or t < 1:
        raise ValueError(f"T must be a positive int; got {T!r}")
    if isinstance(theta, bool) or not isinstance(theta, numbers.Real) or not theta > 0:
        raise ValueError(f"theta must be positive; got {theta!r}")
    i = np.arange(hd // 2, dtype=np.float32)
    exponent = (2 * i) / np.float32(hd)
    freq = np.float32(1.0) / np.power(np.float32(theta), exponent)
    angle = np.arange(t, dtype=np.float32)[:, None] * freq[None, :]
    out = np.empty((t, hd), dtype=np.float32)
    out[:, 0::2] = np.cos(angle)
    out[:, 1::2] = np.sin(angle)
    return torch.from_numpy(out).to(device=device, dtype=dtype)


# --- argument checks (the operators' bodies and fake implementations share them) --------------
def _check_hd(HD: int) -> None:
    if HD % 2:
        raise ValueError(f"HD={HD} is odd: RoPE rotates (2i, 2i+1) pairs")


def _check_freqs(freqs_cis: torch.Tensor, like: torch.Tensor, name: str, T: int, HD: int) -> None:
    if tuple(freqs_cis.shape) != (T, HD):
        raise ValueError(
            f"freqs_cis must be (T, HD) = ({T}, {HD}) for {name} of shape {tuple(like.shape)} "
            f"(precompute_freqs_cis(HD, T), or a longer table's [:T]); got {tuple(freqs_cis.shape)}"
        )
    if freqs_cis.dtype != like.dtype:
        raise ValueError(f"freqs_cis must have {name}'s dtype {like.dtype} (as llm.c); got {freqs_cis.dtype}")
    if freqs_cis.device != like.device:
        raise ValueError(f"freqs_cis must be on {name}'s device {like.device}; got {freqs_cis.device}")


def _check_forward(qkv: torch.Tensor, freqs_cis: torch.Tensor, NH: int, NH_KV: int) -> tuple[int, int, int]:
    _check_qkv(tuple(qkv.shape), NH, NH_KV)
    B, T, _, HD = qkv.shape
    _check_hd(HD)
    _check_freqs(freqs_cis, qkv, "qkv", T, HD)
    return B, T, HD


def _check_backward(dout: torch.Tensor, freqs_cis: torch.Tensor, NH_KV: int) -> tuple[int, ...]:
    B, T, NH, NH_KV, HD = _check(tuple(dout.shape), NH_KV)
    _check_hd(HD)
    _check_freqs(freqs_cis, dout, "dout", T, HD)
    return B, T, NH, NH_KV, HD


# --- the plain PyTorch path (CPU, float64) ----------------------------------------------------
def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _rotate(x: torch.Tensor, freqs_cis: torch.Tensor, backward: bool) -> torch.Tensor:
    """llm.c's rotation of the pairs (2i, 2i+1) of x (B, T, H, HD), or its transpose."""
    cos, sin = freqs_cis[None, :, None, 0::2], freqs_cis[None, :, None, 1::2]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    if backward:
        o0, o1 = x0 * cos + x1 * sin, -x0 * sin + x1 * cos
    else:
        o0, o1 = x0 * cos - x1 * sin, x0 * sin + x1 * cos
    return torch.stack([o0, o1], dim=-1).flatten(-2)


def reference_rope_repkv(qkv: torch.Tensor, freqs_cis: torch.Tensor, NH: int, NH_KV: int) -> torch.Tensor:
    """out (B, T, 3, NH, HD): repkv forward, then RoPE of q and every K replica (not v)."""
    _check_forward(qkv, freqs_cis, NH, NH_KV)
    work = _work_dtype(qkv.dtype)
    freqs = freqs_cis.to(work)
    q, k, v = reference_forward(qkv, NH, NH_KV).to(work).unbind(2)
    out = torch.stack([_rotate(q, freqs, False), _rotate(k, freqs, False), v], dim=2)
    return out.to(qkv.dtype)


def reference_repkv_rope_backward(dout: torch.Tensor, freqs_cis: torch.Tensor, NH_KV: int) -> torch.Tensor:
    """dinp (B, T, NH + 2*NH_KV, HD): RoPE backward of q and every K replica, then repkv backward."""
    _check_backward(dout, freqs_cis, NH_KV)
    work = _work_dtype(dout.dtype)
    freqs = freqs_cis.to(work)
    q, k, v = dout.to(work).unbind(2)
    rotated = torch.stack([_rotate(q, freqs, True), _rotate(k, freqs, True), v], dim=2)
    return reference_backward(rotated, NH_KV).to(dout.dtype)


# --- the operators ----------------------------------------------------------------------------
def _run(op: str, out: torch.Tensor, x: torch.Tensor, freqs_cis: torch.Tensor, shape: tuple) -> torch.Tensor:
    """Launch op's tuned kernel (out, x, freqs_cis) on the current stream."""
    x, freqs_cis = _launcher.aligned(x), _launcher.aligned(freqs_cis)
    device = x.get_device()
    _launcher.launch(_launcher.launcher_for(op, shape, x.dtype, device), device, out, x, freqs_cis)
    return out


@torch.library.custom_op("repkv_tune::rope_repkv", mutates_args=())
def _rope_repkv(qkv: torch.Tensor, freqs_cis: torch.Tensor, NH: int, NH_KV: int) -> torch.Tensor:
    if not _launcher.tuned(qkv):
        return reference_rope_repkv(qkv, freqs_cis, NH, NH_KV)
    B, T, HD = _check_forward(qkv, freqs_cis, NH, NH_KV)
    out = qkv.new_empty((B, T, 3, NH, HD))
    return _run("rope_repkv_forward", out, qkv, freqs_cis, (B, T, NH, NH_KV, HD))


@_rope_repkv.register_fake
def _(qkv: torch.Tensor, freqs_cis: torch.Tensor, NH: int, NH_KV: int) -> torch.Tensor:
    B, T, HD = _check_forward(qkv, freqs_cis, NH, NH_KV)
    return qkv.new_empty((B, T, 3, NH, HD))


@torch.library.custom_op("repkv_tune::repkv_rope_backward", mutates_args=())
def _repkv_rope_backward(dout: torch.Tensor, freqs_cis: torch.Tensor, NH_KV: int) -> torch.Tensor:
    if not _launcher.tuned(dout):
        return reference_repkv_rope_backward(dout, freqs_cis, NH_KV)
    B, T, NH, NH_KV, HD = _check_backward(dout, freqs_cis, NH_KV)
    dinp = dout.new_empty((B, T, NH + 2 * NH_KV, HD))
    return _run("repkv_rope_backward", dinp, dout, freqs_cis, (B, T, NH, NH_KV, HD))


@_repkv_rope_backward.register_fake
def _(dout: torch.Tensor, freqs_cis: torch.Tensor, NH_KV: int) -> torch.Tensor:
    B, T, NH, NH_KV, HD = _check_backward(dout, freqs_cis, NH_KV)
    return dout.new_empty((B, T, NH + 2 * NH_KV, HD))


def _setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(inputs[1])
    ctx.NH_KV = inputs[3]


def _rope_repkv_grad(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
    (freqs_cis,) = ctx.saved_tensors
    return torch.ops.repkv_tune.repkv_rope_backward(grad, freqs_cis, ctx.NH_KV), None, None, None


torch.library.register_autograd("repkv_tune::rope_repkv", _rope_repkv_grad, setup_context=_setup)


def rope_repkv(qkv: torch.Tensor, freqs_cis: torch.Tensor, NH: int, NH_KV: int) -> torch.Tensor:
    """llm.c's repkv_forward then rope_forward, fused: qkv (B, T, NH + 2*NH_KV, HD) and
    freqs_cis (T, HD) of qkv's dtype (`precompute_freqs_cis`) -> (B, T, 3, NH, HD), each K and V
    head replicated NH / NH_KV times, q and k rotated (v not). Its backward is the fused
    `repkv_rope_backward` (the gradient of qkv only). HD must be even."""
    NH, NH_KV = _counts(NH=NH, NH_KV=NH_KV)
    return torch.ops.repkv_tune.rope_repkv(qkv, freqs_cis, NH, NH_KV)


def repkv_rope_backward(dout: torch.Tensor, freqs_cis: torch.Tensor, NH_KV: int) -> torch.Tensor:
    """rope_repkv's backward alone: dout (B, T, 3, NH, HD), freqs_cis (T, HD) -> dinp
    (B, T, NH + 2*NH_KV, HD), q and each K group's sum rotated back, each V group summed."""
    (NH_KV,) = _counts(NH_KV=NH_KV)
    return torch.ops.repkv_tune.repkv_rope_backward(dout, freqs_cis, NH_KV)


__all__ = [
    "precompute_freqs_cis",
    "reference_repkv_rope_backward",
    "reference_rope_repkv",
    "repkv_rope_backward",
    "rope_repkv",
]
