"""kvconf's MPFR oracle on your own tensors: exact dot products and GEMMs, certified attention. Inputs are torch
tensors whose values are values of `format` (a float16 tensor holds them by construction; pass format="f16" with a
float32 tensor of float16 values); results are float64 tensors, the exact value rounded to the nearest double, and
`rounded`, the exact value correctly rounded to `format`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, cast

from . import _core
from ._kernel import DType, _torch, format_of

if TYPE_CHECKING:
    import numpy
    from numpy.typing import NDArray
    from torch import Tensor


class Dot(NamedTuple):
    exact: float
    rounded: float
    abs_sum: float


class Gemm(NamedTuple):
    exact: Tensor      # (m, n) float64
    rounded: Tensor    # (m, n) float64
    abs_sum: Tensor    # (m, n) float64


class Attention(NamedTuple):
    exact: Tensor      # (n_q, n_heads, d_v) float64
    rounded: Tensor    # (n_q, n_heads, d_v) float64


def _doubles(name: str, t: Any) -> NDArray[numpy.float64]:
    """t's values as a flat float64 CPU tensor, which kvconf._core takes through DLPack (its stub, nanobind's
    default, names a numpy array)."""
    _torch()
    import torch
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    return cast("NDArray[numpy.float64]", t.detach().to(device="cpu", dtype=torch.float64).contiguous().flatten())


def _fmt(format: DType | None, *tensors: Tensor) -> str:
    if format is not None:
        return format_of(format)
    return format_of(tensors[0].dtype)


def dot(x: Tensor, y: Tensor, format: DType | None = None) -> Dot:
    """Σ x_i·y_i exactly: exact (nearest double), rounded (to `format`), abs_sum (Σ|x_i·y_i|, rounded up)."""
    f = _fmt(format, x)
    value, approx, abs_sum = _core.oracle_dot(_doubles("x", x), _doubles("y", y), f, f)
    return Dot(approx, value, abs_sum)


def gemm(x: Tensor, w: Tensor, format: DType | None = None) -> Gemm:
    """y = x·wᵀ exactly, x: (m, k), w: (n, k): exact, rounded and abs_sum as (m, n) float64 tensors."""
    _torch()
    import torch
    if x.dim() != 2 or w.dim() != 2 or x.shape[1] != w.shape[1]:
        raise ValueError(f"x {tuple(x.shape)}, w {tuple(w.shape)}: expected x (m, k) and w (n, k)")
    m, k = x.shape
    n = w.shape[0]
    y, approx, abs_sum = _core.oracle_gemm(_doubles("x", x), _doubles("w", w), m, n, k, _fmt(format, x))

    def as_t(v: list[float]) -> Tensor:
        return torch.tensor(v, dtype=torch.float64).view(m, n)
    return Gemm(as_t(approx), as_t(y), as_t(abs_sum))


def call(n_q: int, n_kv: int, n_heads: int, n_kv_heads: int, d: int, d_v: int | None = None, *,
         q_offset: int | None = None, causal: bool = True, window: int = 0, scale: float | None = None,
         softcap: float = 0.0, capacity: int = 0) -> _core.AttentionCall:
    """An AttentionCall for your own shapes (scale default: the float nearest 1/sqrt(d); q_offset default: the last
    n_q positions, n_kv - n_q)."""
    d_v = d if d_v is None else d_v
    q_offset = n_kv - n_q if q_offset is None else q_offset
    if scale is None:
        import struct
        scale = float(struct.unpack("f", struct.pack("f", d ** -0.5))[0])
    return _core.attention_call(n_q, n_kv, n_heads, n_kv_heads, d, d_v, q_offset, causal, window, float(scale),
                                float(softcap), capacity)


def attention(q: Tensor, k: Tensor, v: Tensor, call: _core.AttentionCall, format: DType | None = None) -> Attention:
    """Certified attention: q (n_q, n_heads, d), k (n_kv, n_kv_heads, d), v (n_kv, n_kv_heads, d_v) (the visible
    rows, no unused capacity), call from kvconf.oracle.call or a case: exact and rounded, (n_q, n_heads, d_v)."""
    _torch()
    import torch
    out, approx = _core.oracle_attention(_doubles("q", q), _doubles("k", k), _doubles("v", v), call,
                                         _fmt(format, q))
    shape = (call.n_q, call.n_heads, call.d_v)
    return Attention(torch.tensor(approx, dtype=torch.float64).view(shape),
                     torch.tensor(out, dtype=torch.float64).view(shape))
