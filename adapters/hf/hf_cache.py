# Reading a transformers model and its cache as kvconf.trace needs them: whether the forward takes logits_to_keep, and
# a cache's K/V rows as k_rows / v_rows (docs/TRACES.md).
"""supports_logits_to_keep(model) and cache_rows(cache): shared by both paths (kvconf_hf_trace) and the scenarios."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor


def supports_logits_to_keep(model: Any) -> bool:
    import inspect
    return "logits_to_keep" in inspect.signature(model.forward).parameters


def cache_rows(cache: Any, index: int = 0, start: int = 0) -> tuple[Tensor, Tensor]:
    """A transformers cache's K (after RoPE) and V rows of batch entry `index`, from row `start` on, as kvconf.trace's
    k_rows / v_rows: (L, N, kv_heads * d), float32 (exact widening of the cache's dtype)."""
    import torch
    held = [int(layer.keys.shape[2]) for layer in cache.layers]
    if len(set(held)) != 1:  # Gemma-2's sliding-window layers keep only their last rows
        raise ValueError(f"--kv: this model's cache holds {min(held)} rows in some layers and {max(held)} in others "
                         f"(sliding-window layers keep only their last rows), so its K/V rows cannot be written as "
                         f"k_rows / v_rows (L, N, D_kv)")
    ks: list[Tensor] = []
    vs: list[Tensor] = []
    for layer in cache.layers:  # keys / values: (batch, kv_heads, rows, d)
        for t, out in ((layer.keys, ks), (layer.values, vs)):
            rows = t[index, :, start:, :]
            out.append(rows.transpose(0, 1).reshape(rows.shape[1], -1).float())
    return torch.stack(ks).contiguous(), torch.stack(vs).contiguous()
