"""The bounds kvconf judges black-box kernels by (docs/TOLERANCES.md §10), on your own tensors, for assertions of your
own: |kernel − oracle.exact| <= bound, elementwise."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _core
from ._kernel import DType, _torch
from .oracle import _doubles, _fmt

if TYPE_CHECKING:
    from torch import Tensor


def gemm(x: Tensor, w: Tensor, format: DType | None = None) -> Tensor:
    """(m, n) float64 bounds of a GEMM y = x·wᵀ in `format` (fp32 products and sums in any order, one rounding to
    format), from the oracle's Σ|x·w| per element."""
    from . import oracle
    f = _fmt(format, x)
    g = oracle.gemm(x, w, f)
    k = x.shape[1]
    _torch()
    import torch
    return torch.tensor([_core.bound_gemm(k, float(s), f) for s in g.abs_sum.flatten().tolist()],
                        dtype=torch.float64).view(g.abs_sum.shape)


def attention(q: Tensor, k: Tensor, v: Tensor, call: _core.AttentionCall, format: DType | None = None, *,
              exp_error_ulps: int = 1, flush_exp: bool = True, exp2_scale: bool = False) -> Tensor:
    """(n_q, n_heads, d_v) float64 bounds of a black-box attention kernel in `format` with that exp budget and scale
    (exp2_scale: folded with log2 e, as AttentionKernel states it), for these inputs (the same bound
    check_attention's oracle_bound rule uses)."""
    _torch()
    import torch
    rel = max(exp_error_ulps, 1) * 2.0**-23
    b = _core.bound_attention(_doubles("q", q), _doubles("k", k), _doubles("v", v), call, _fmt(format, q), rel,
                              _core.EXP_FLUSH_ABS_ERROR if flush_exp else 0.0, bool(exp2_scale))
    return torch.tensor(b, dtype=torch.float64).view(call.n_q, call.n_heads, call.d_v)
