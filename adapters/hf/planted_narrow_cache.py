# A planted fault for the cached_kv rule (docs/SCENARIOS.md): kvconf_hf_trace.py whose cache-ON path keeps its KV cache
# in a narrower format than the model computes in (every K and V row stored with 8 significand bits, bf16's, in an
# fp16 or fp32 model; with 4, float8_e4m3's, in a bf16 one), as an engine configured with a low-precision cache type
# would. The cache-OFF side (and its K/V capture) is transformers' own. Same command line as kvconf_hf_trace.py.
"""Usage: planted_narrow_cache.py <kvconf_hf_trace.py options>"""
from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kvconf_hf_trace as hf  # noqa: E402


def narrow_cache(model: Any) -> Any:
    import torch
    from transformers import DynamicCache

    class NarrowCache(DynamicCache):  # type: ignore[misc]  # DynamicCache is Any: mypy skips transformers
        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any,
                   **kwargs: Any) -> Any:
            narrow = torch.float8_e4m3fn if key_states.dtype == torch.bfloat16 else torch.bfloat16
            return super().update(key_states.to(narrow).to(key_states.dtype),
                                  value_states.to(narrow).to(value_states.dtype), layer_idx, *args, **kwargs)

    return NarrowCache(config=model.config)


def main(argv: Sequence[str] | None = None) -> int:
    """kvconf_hf_trace.py's main with the narrow cache planted (and removed again: the test calls it in-process)."""
    run_path = hf.run_path
    hf.run_path = functools.partial(run_path, cache_factory=narrow_cache)
    try:
        return hf.main(argv)
    finally:
        hf.run_path = run_path


if __name__ == "__main__":
    sys.exit(main())
