# kvconf's sampler (engine/include/kvconf/engine/sampling.hpp, engine/src/sampling.cpp) ported operation for
# operation in float64, and its SplitMix64 step draws: the adapters choose each token exactly as kvconf's engine would.
"""Sampler, step_draw and sample: kvconf's token choice, bit for bit, for the transformers adapter's both paths."""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

_MASK64 = (1 << 64) - 1


@dataclasses.dataclass(frozen=True)
class Sampler:
    """kvconf::engine::Sampler: strategy greedy | topk | topp, k, p, temperature and the seed of the step draws."""
    strategy: str = "greedy"
    top_k: int = 50
    top_p: float = 0.9
    temperature: float = 1.0
    seed: int = 0

    def metadata(self) -> dict:
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


def _argmax(x: np.ndarray) -> int:
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
    w = [weight(i) for i in chosen]
    total = 0.0
    for wi in w:
        total += wi
    target = u * total
    cum = 0.0
    for i, wi in zip(chosen, w):
        cum += wi
        if cum > target:
            return i
    return chosen[-1]  # u so close to 1 that rounding left the cumulative mass below it


def _as_float64(logits: Any) -> np.ndarray:
    """A logits row as float64 numpy, exactly (float16 / bfloat16 / float32 all convert without rounding)."""
    if hasattr(logits, "detach"):  # torch.Tensor (numpy has no bfloat16)
        import torch
        return logits.detach().to(device="cpu", dtype=torch.float64).numpy()
    return np.asarray(logits, dtype=np.float64)


def self_test() -> None:
    """step_draw against SplitMix64 computed by hand, and the sampler on kvconf's hand-computed distribution."""
    # SplitMix64 as Vigna's splitmix64.c writes it: a stateful generator, state += gamma, then the mix.
    def splitmix64_outputs(seed: int, n: int) -> list[int]:
        out, state = [], seed
        for _ in range(n):
            state = (state + 0x9E3779B97F4A7C15) % 2 ** 64
            z = state
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2 ** 64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2 ** 64
            out.append(z ^ (z >> 31))
        return out

    # Published outputs of splitmix64.c seeded with 0 (also tests/engine/sampling_test.cpp).
    ref0 = [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    assert splitmix64_outputs(0, 3) == ref0, "hand SplitMix64 disagrees with the published outputs"
    for t, r in enumerate(ref0):
        assert step_draw(0, t) == math.ldexp(r >> 11, -53), f"step_draw(0, {t})"
    for seed in (1, 3, 7, 2024, 2 ** 64 - 1):
        for t, r in enumerate(splitmix64_outputs(seed, 50)):
            assert step_draw(seed, t) == (r >> 11) / 2 ** 53, f"step_draw({seed}, {t})"
    us = [step_draw(7, t) for t in range(20000)]
    assert all(0.0 <= u < 1.0 for u in us)
    assert abs(sum(us) / len(us) - 0.5) < 6 * math.sqrt(1 / 12 / len(us))

    # Sampler cases of tests/engine/sampling_test.cpp: probabilities 1/8, 2/8, 5/8.
    three = np.array([0.0, math.log(2.0), math.log(5.0)], dtype=np.float32)
    g = Sampler("greedy")
    assert sample(np.array([1, 3, 3, 2], np.float32), g, 0.5) == 1
    assert sample(np.array([-1, -1, -1], np.float32), g, 0.0) == 0
    assert sample(np.array([np.nan, 1, 2], np.float32), g, 0.0) == 2
    allp = Sampler("topp", top_p=1.0)
    for u, tok in ((0.0, 0), (0.12, 0), (0.13, 1), (0.37, 1), (0.38, 2), (math.nextafter(1.0, 0.0), 2)):
        assert sample(three, allp, u) == tok, ("topp1", u)
    for u in (0.0, 0.5, 0.99):
        assert sample(three, Sampler("topp", top_p=0.6), u) == 2
    p7 = Sampler("topp", top_p=0.7)
    assert (sample(three, p7, 0.28), sample(three, p7, 0.29), sample(three, p7, 0.99)) == (1, 2, 2)
    assert sample(three, Sampler("topp", top_p=0.9), 0.1) == 0
    k2 = Sampler("topk", top_k=2)
    assert (sample(three, k2, 0.28), sample(three, k2, 0.29), sample(three, k2, 0.999)) == (1, 2, 2)
    k9 = Sampler("topk", top_k=9)
    assert (sample(three, k9, 0.1), sample(three, k9, 0.2), sample(three, k9, 0.88)) == (0, 1, 2)
    s = 1.0 + math.sqrt(2.0) + math.sqrt(5.0)
    c1, c2 = 1.0 / s, (1.0 + math.sqrt(2.0)) / s
    hot = Sampler("topk", temperature=2.0)
    assert [sample(three, hot, u) for u in (c1 - 1e-6, c1 + 1e-6, c2 - 1e-6, c2 + 1e-6)] == [0, 1, 1, 2]
    assert sample(three, Sampler("topp", top_p=1.0, temperature=0.01), math.nextafter(1.0, 0.0)) == 2
    rng = np.random.default_rng(12345)
    for trial in range(100):  # k = 1 and a tiny p are greedy (many ties among small integer logits)
        z = rng.integers(0, 8, 40).astype(np.float32)
        u = step_draw(99, trial)
        expect = int(np.argmax(z))
        assert sample(z, Sampler("topk", top_k=1), u) == expect
        assert sample(z, Sampler("topp", top_p=1e-9), u) == expect
