"""Four decode-only attention bugs as test plants, written independently of kvconf's examples: one readable pure-torch
attention whose prefill (several query rows) is right and whose decode path (one query row, an engine's separate
decode kernel) carries one bug each, as a kernel author might write it. test_default_set.py expects the case set a
pytest user gets by default to catch every one, and the kernel without a bug to pass it."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

BUGS: dict[str, str] = {
    "head_map": "decode maps query head h to KV head h % H_kv instead of h // (H / H_kv)",
    "input_precision_scores": "decode keeps its scores q·k·scale in the input precision (fp16) before the softmax",
    "drops_newest_key": "decode attends to the first n_kv - 1 keys (the length read before the new row counts)",
    "window_off_by_one": "decode's sliding window keeps window + 1 keys (dist <= window for dist < window)",
}


def attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, call, bug: str | None = None
              ) -> torch.Tensor:
    """q (n_q, H, d); k_cache (capacity, H_kv, d); v_cache (capacity, H_kv, d_v) -> (n_q, H, d_v). Scores, softmax
    and P·V in fp32, one rounding to q's dtype; `bug` (a key of BUGS) is planted in the decode path only."""
    if bug is not None and bug not in BUGS:
        raise ValueError(f"bug={bug!r}: expected None or one of {', '.join(BUGS)}")
    n_q, heads, _ = q.shape
    decode = n_q == 1
    planted = bug if decode else None
    n = call.n_kv - 1 if planted == "drops_newest_key" else call.n_kv
    group = heads // call.n_kv_heads
    h = torch.arange(heads)
    kv_head = h % call.n_kv_heads if planted == "head_map" else h // group       # (H,)
    k = k_cache[:n].float()[:, kv_head].transpose(0, 1)                         # (H, n, d)
    v = v_cache[:n].float()[:, kv_head].transpose(0, 1)                         # (H, n, d_v)
    s = torch.matmul(q.float().transpose(0, 1), k.transpose(1, 2)) * call.scale  # (H, n_q, n)
    if planted == "input_precision_scores":
        s = s.to(q.dtype).float()
    if call.softcap > 0:
        s = call.softcap * torch.tanh(s / call.softcap)
    pos = call.q_offset + torch.arange(n_q).unsqueeze(1)                        # (n_q, 1) absolute positions
    key = torch.arange(n).unsqueeze(0)                                          # (1, n)
    see = key <= pos if call.causal else torch.ones(n_q, n, dtype=torch.bool)
    if call.window > 0:
        dist = pos - key if call.causal else (pos - key).abs()
        see &= dist <= call.window if planted == "window_off_by_one" else dist < call.window
    p = torch.softmax(s.masked_fill(~see, float("-inf")), dim=-1)               # (H, n_q, n)
    return torch.matmul(p, v).transpose(0, 1).to(q.dtype).contiguous()         # (n_q, H, d_v)


def planted(bug: str | None) -> Callable[..., torch.Tensor]:
    """The attention with `bug` planted in its decode path (None: without a bug), named after it."""
    fn = functools.partial(attention, bug=bug)
    fn.__name__ = bug or "correct"  # type: ignore[attr-defined]
    return fn
