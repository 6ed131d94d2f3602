"""llm.c's two chains written in PyTorch, as a user would write them for `torch.compile` (the
chain benchmark's torch.compile peer): the K/V replication by expand (HF's repeat_kv) and RoPE
as llm.c computes it (pairs (2i, 2i+1), (cos, sin) in freqs_cis columns (2i, 2i+1), in float,
rounded once to the tensor's dtype; variants.rope_repkv_forward.rope).

Each takes flat tensors, as the benchmark's buffers are (the packed qkv or dout, freqs_cis of
T*HD elements), and the shape as plain ints, so a `dynamic=False` compile specializes on them.
float64 tensors stay float64 (the CPU tests compare them with the ops' float64 references);
other dtypes compute in float32.
"""

from __future__ import annotations

import torch

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _work(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def rope(x: torch.Tensor, freqs_cis: torch.Tensor, backward: bool) -> torch.Tensor:
    """llm.c's rope_forward (or rope_backward_inplace) of x (B, T, parts, NH, HD) with freqs_cis
    (T, HD): each pair rotated in float, rounded to x's dtype."""
    work = _work(x.dtype)
    freqs = freqs_cis.to(work)
    cos = freqs[None, :, None, None, 0::2]
    sin = freqs[None, :, None, None, 1::2]
    x0, x1 = x[..., 0::2].to(work), x[..., 1::2].to(work)
    if backward:
        o0, o1 = x0 * cos + x1 * sin, -x0 * sin + x1 * cos
    else:
        o0, o1 = x0 * cos - x1 * sin, x0 * sin + x1 * cos
    return torch.stack([o0, o1], dim=-1).flatten(-2).to(x.dtype)


def replicate(x: torch.Tensor, nrep: int) -> torch.Tensor:
    """(B, T, NH_KV, HD) -> (B, T, NH_KV * nrep, HD), each head repeated nrep times in place."""
    B, T, NH_KV, HD = x.shape
    return x[:, :, :, None, :].expand(B, T, NH_KV, nrep, HD).reshape(B, T, NH_KV * nrep, HD)


def rope_repkv_forward_chain(
    qkv: torch.Tensor, freqs_cis: torch.Tensor, B: int, T: int, NH: int, NH_KV: int, HD: int
) -> torch.Tensor:
    """llm.c's repkv_forward then rope_forward: qkv (B, T, NH + 2*NH_KV, HD), freqs_cis (T, HD)
    -> out (B, T, 3, NH, HD), q and every K replica rotated, v copied."""
    nrep = NH // NH_KV
    x = qkv.view(B, T, NH + 2 * NH_KV, HD)
    q = x[:, :, :NH]
    k = replicate(x[:, :, NH : NH + NH_KV], nrep)
    v = replicate(x[:, :, NH + NH_KV :], nrep)
    rotated = rope(torch.stack([q, k], dim=2), freqs_cis.view(T, HD), backward=False)
    return torch.cat([rotated, v[:, :, None]], dim=2)


def repkv_rope_backward_chain(
    dout: torch.Tensor, freqs_cis: torch.Tensor, B: int, T: int, NH: int, NH_KV: int, HD: int
) -> torch.Tensor:
    """llm.c's rope_backward_inplace then repkv_backward: dout (B, T, 3, NH, HD), freqs_cis
    (T, HD) -> dinp (B, T, NH + 2*NH_KV, HD). As llm.c, q and each K replica are rotated back
    and rounded to the dtype, then each K/V group is summed in float and rounded again."""
    nrep = NH // NH_KV
    d = dout.view(B, T, 3, NH, HD)
    qk = rope(d[:, :, :2], freqs_cis.view(T, HD), backward=True)
    work = _work(dout.dtype)
    k = qk[:, :, 1].reshape(B, T, NH_KV, nrep, HD).to(work).sum(dim=3)
    v = d[:, :, 2].reshape(B, T, NH_KV, nrep, HD).to(work).sum(dim=3)
    return torch.cat([qk[:, :, 0], k.to(dout.dtype), v.to(dout.dtype)], dim=2)


# The fused op each chain computes -> its PyTorch chain.
CHAINS = {
    "rope_repkv_forward": rope_repkv_forward_chain,
    "repkv_rope_backward": repkv_rope_backward_chain,
}
