"""Two more kernels as an engine calls them: nn.Linear's projection (torch.nn.functional.linear, x: (m, k), w: (n, k))
and HF's RMSNorm written in torch ops (LlamaRMSNorm: w · (x·r) in the dtype; Gemma2RMSNorm: (x·r)·(1 + w) in fp32),
r = rsqrt(mean(x²) + eps) in fp32."""

import torch


def linear(x, w):
    """x: (m, k), w: (n, k) -> (m, n)."""
    return torch.nn.functional.linear(x, w)


def rms_norm(x, w, params):
    """x: (rows, d), w: (d) -> (rows, d), as transformers' LlamaRMSNorm / Gemma2RMSNorm."""
    h = x.float()
    r = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + params.eps)  # (rows, 1), fp32
    if params.one_plus_weight:  # Gemma: the weight applied in fp32, one rounding
        return (h * r * (1.0 + w.float())).to(x.dtype)
    return w * (h * r).to(x.dtype)  # Llama: rounded to the dtype, then the weight
