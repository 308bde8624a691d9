# pytest: the adapters' port of kvconf's sampler (kvconf_sampler.py) against SplitMix64 and kvconf's own cases.
"""step_draw is SplitMix64 (its published outputs and a hand-written generator) and sample() picks what
tests/engine/sampling_test.cpp expects of kvconf's C++ sampler on the same distributions. Runs in HfAdapter's CTest
and behind `kvconf_hf_trace.py --self-test`."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kvconf_sampler import Sampler, sample, step_draw

# Published outputs of splitmix64.c seeded with 0 (also tests/engine/sampling_test.cpp).
REF0 = [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
# Probabilities 1/8, 2/8, 5/8 (tests/engine/sampling_test.cpp).
THREE = np.array([0.0, math.log(2.0), math.log(5.0)], dtype=np.float32)


def splitmix64_outputs(seed: int, n: int) -> list[int]:
    """SplitMix64 as Vigna's splitmix64.c writes it: a stateful generator, state += gamma, then the mix."""
    out, state = [], seed
    for _ in range(n):
        state = (state + 0x9E3779B97F4A7C15) % 2 ** 64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2 ** 64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2 ** 64
        out.append(z ^ (z >> 31))
    return out


def test_hand_splitmix64_gives_the_published_outputs() -> None:
    assert splitmix64_outputs(0, 3) == REF0


@pytest.mark.parametrize("t", range(3))
def test_step_draw_is_the_published_output_scaled(t: int) -> None:
    assert step_draw(0, t) == math.ldexp(REF0[t] >> 11, -53)


@pytest.mark.parametrize("seed", [1, 3, 7, 2024, 2 ** 64 - 1])
def test_step_draw_is_splitmix64(seed: int) -> None:
    assert [step_draw(seed, t) for t in range(50)] == [(r >> 11) / 2 ** 53 for r in splitmix64_outputs(seed, 50)]


def test_step_draws_are_uniform_on_0_1() -> None:
    us = [step_draw(7, t) for t in range(20000)]
    assert all(0.0 <= u < 1.0 for u in us)
    assert abs(sum(us) / len(us) - 0.5) < 6 * math.sqrt(1 / 12 / len(us))  # six standard errors of the mean


@pytest.mark.parametrize("logits, want", [([1, 3, 3, 2], 1), ([-1, -1, -1], 0), ([np.nan, 1, 2], 2)])
def test_greedy_is_the_first_arg_max_never_nan(logits: list[float], want: int) -> None:
    assert sample(np.array(logits, np.float32), Sampler("greedy"), 0.5) == want


@pytest.mark.parametrize("u, want", [(0.0, 0), (0.12, 0), (0.13, 1), (0.37, 1), (0.38, 2),
                                     (math.nextafter(1.0, 0.0), 2)])
def test_top_p_one_walks_the_cumulative_mass(u: float, want: int) -> None:
    assert sample(THREE, Sampler("topp", top_p=1.0), u) == want


@pytest.mark.parametrize("sampler, draws, want", [
    (Sampler("topp", top_p=0.6), (0.0, 0.5, 0.99), (2, 2, 2)),
    (Sampler("topp", top_p=0.7), (0.28, 0.29, 0.99), (1, 2, 2)),
    (Sampler("topp", top_p=0.9), (0.1,), (0,)),
    (Sampler("topk", top_k=2), (0.28, 0.29, 0.999), (1, 2, 2)),
    (Sampler("topk", top_k=9), (0.1, 0.2, 0.88), (0, 1, 2)),
], ids=["topp0.6", "topp0.7", "topp0.9", "topk2", "topk9"])
def test_top_k_and_top_p_keep_kvconfs_tokens(sampler: Sampler, draws: tuple[float, ...],
                                             want: tuple[int, ...]) -> None:
    assert tuple(sample(THREE, sampler, u) for u in draws) == want


def test_temperature_divides_the_logits() -> None:
    s = 1.0 + math.sqrt(2.0) + math.sqrt(5.0)  # T = 2: weights 1, sqrt 2, sqrt 5
    c1, c2 = 1.0 / s, (1.0 + math.sqrt(2.0)) / s
    hot = Sampler("topk", temperature=2.0)
    assert [sample(THREE, hot, u) for u in (c1 - 1e-6, c1 + 1e-6, c2 - 1e-6, c2 + 1e-6)] == [0, 1, 1, 2]
    assert sample(THREE, Sampler("topp", top_p=1.0, temperature=0.01), math.nextafter(1.0, 0.0)) == 2


def test_top_1_and_a_tiny_p_are_greedy_among_ties() -> None:
    rng = np.random.default_rng(12345)
    for trial in range(100):  # many ties among small integer logits
        z = rng.integers(0, 8, 40).astype(np.float32)
        u = step_draw(99, trial)
        expect = int(np.argmax(z))
        assert sample(z, Sampler("topk", top_k=1), u) == expect, trial
        assert sample(z, Sampler("topp", top_p=1e-9), u) == expect, trial
