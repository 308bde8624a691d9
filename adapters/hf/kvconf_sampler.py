# kvconf's sampler (engine/include/kvconf/engine/sampling.hpp, engine/src/sampling.cpp) ported operation for
# operation in float64, and its SplitMix64 step draws: the adapters choose each token exactly as kvconf's engine would.
"""Sampler, step_draw and sample: kvconf's token choice, bit for bit, for the transformers adapter's both paths
(test_kvconf_sampler.py checks them against SplitMix64 and kvconf's hand-computed cases)."""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

_MASK64 = (1 << 64) - 1


@dataclasses.dataclass(frozen=True)
class Sampler:
    """kvconf::engine::Sampler: strategy greedy | topk | topp, k, p, temperature and the seed of the step draws."""
    strategy: str = "greedy"
    top_k: int = 50
    top_p: float = 0.9
    temperature: float = 1.0
    seed: int = 0

    def metadata(self) -> dict[str, Any]:
        return {"name": self.strategy, "top_k": self.top_k, "top_p": self.top_p,
                "temperature": self.temperature, "seed": self.seed}


def step_draw(seed: int, step: int) -> float:
    """Output number `step` (0-based) of SplitMix64 seeded with `seed`, its top 53 bits scaled to [0, 1).

    The closed form of kvconf::engine::step_draw: state_{step+1} = seed + (step + 1) * golden gamma, then the mix.
    """
    z = (seed + (step + 1) * 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    z ^= z >> 31
    return float(z >> 11) * 2.0 ** -53  # exact: z >> 11 has at most 53 bits


def _argmax(x: NDArray[np.float64]) -> int:
    """Arg-max, lowest index on ties; NaN never chosen (0 when every entry is NaN) -- kvconf's argmax()."""
    finite = ~np.isnan(x)
    if not finite.any():
        return 0
    m = np.max(x[finite])
    return int(np.flatnonzero(finite & (x == m))[0])


def sample(logits: Any, s: Sampler, u: float) -> int:
    """kvconf::engine::sample over one full-vocabulary logits row (any float dtype; converted exactly to float64).

    Greedy: the arg-max, lowest index on ties. Top-k / top-p: z = logits / T in double; the kept tokens are the k
    largest, or the smallest prefix of the tokens sorted by (probability desc, index asc) whose mass reaches p; then,
    walking the kept tokens in vocabulary order, the first whose cumulative weight exceeds u * sum. Sums are
    sequential in the C++ order and exp is the C library's (math.exp), so the choice matches the C++ bit for bit.
    """
    x = _as_float64(logits)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("sample: logits must be a non-empty 1-D row")
    if s.strategy == "greedy":
        return _argmax(x)
    if s.strategy not in ("topk", "topp"):
        raise ValueError(f"sample: unknown strategy '{s.strategy}' (choices: greedy, topk, topp)")
    if not (s.temperature > 0.0) or not math.isfinite(s.temperature):
        raise ValueError(f"sample: temperature must be > 0 (got {s.temperature})")
    if s.strategy == "topk" and s.top_k < 1:
        raise ValueError("sample: top_k must be >= 1")
    if s.strategy == "topp" and not (0.0 < s.top_p <= 1.0):
        raise ValueError(f"sample: top_p must be in (0, 1] (got {s.top_p})")

    n = x.size
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        z = np.where(np.isnan(x), -np.inf, x / s.temperature)  # IEEE division, as static_cast<double>(l) / T
    best = _argmax(x)
    zmax = float(z[best])
    if zmax == -math.inf:
        return best  # nothing has mass
    # Tokens by (z desc, index asc): a strict total order, so any correct sort gives the C++ order.
    order = np.lexsort((np.arange(n), -z))

    def weight(i: int) -> float:
        zi = float(z[i])
        return 1.0 if zi == zmax else math.exp(zi - zmax)

    if s.strategy == "topk":
        kept = min(s.top_k, n)
    else:
        ws = [weight(int(i)) for i in order]
        total = 0.0
        for w in ws:
            total += w
        mass = 0.0
        kept = 0
        while kept < n:
            mass += ws[kept] / total
            kept += 1
            if mass >= s.top_p:
                break
    chosen = sorted(int(i) for i in order[:kept])  # the kept tokens in vocabulary order
    weights = [weight(i) for i in chosen]
    total = 0.0
    for wi in weights:
        total += wi
    target = u * total
    cum = 0.0
    for i, wi in zip(chosen, weights):
        cum += wi
        if cum > target:
            return i
    return chosen[-1]  # u so close to 1 that rounding left the cumulative mass below it


def _as_float64(logits: Any) -> NDArray[np.float64]:
    """A logits row as float64 numpy, exactly (float16 / bfloat16 / float32 all convert without rounding)."""
    if hasattr(logits, "detach"):  # torch.Tensor (numpy has no bfloat16)
        import torch
        return np.asarray(logits.detach().to(device="cpu", dtype=torch.float64).numpy(), dtype=np.float64)
    return np.asarray(logits, dtype=np.float64)

