"""The case set a pytest user gets by default (kvconf.pytest_plugin.DEFAULT_SET) catches four decode-only attention
bugs written independently of kvconf's examples (decode_plants.py), each on cases with the property that makes it
visible, and passes the same kernel without a bug; its cases exercise every property of the full table."""

from __future__ import annotations

import pytest
import torch

import kvconf
from decode_plants import BUGS, planted
from kvconf.pytest_plugin import DEFAULT_SET

CASES = kvconf.attention_cases(DEFAULT_SET)

# The case property (AttentionCase.properties, conformance/coverage.hpp) without which a bug does not show: the maps
# h % H_kv and h // group agree for MHA and MQA; a window as wide as the cache keeps every key either way; scores
# below 32 kept in fp16 stayed within the bound (measured on the quick and default sets: only cases with scores.large
# caught it).
NEEDS: dict[str, str | None] = {"head_map": "heads.gqa", "window_off_by_one": "mask.window",
                                "input_precision_scores": "scores.large", "drops_newest_key": None}


def kernel(bug: str | None) -> kvconf.AttentionKernel:
    return kvconf.AttentionKernel(planted(bug), dtype=torch.float16, name=bug or "correct")


def verdict(k: kvconf.AttentionKernel, case) -> str | None:
    """None when every rule passes; else the rules that failed, or the KernelError."""
    try:
        report = kvconf.check_attention(k, case)
    except kvconf.KernelError as e:
        return f"KernelError: {str(e).splitlines()[0]}"
    return None if report.passed else ", ".join(r.rule for r in report.failures)


def test_the_kernel_without_a_bug_passes_the_default_set():
    k = kernel(None)
    for case in CASES:
        kvconf.check_attention(k, case).assert_pass()


@pytest.mark.parametrize("bug", BUGS)
def test_each_decode_bug_is_caught_by_the_default_set(bug: str):
    need = NEEDS[bug]
    with_need = [c.id for c in CASES if need is None or need in c.properties]
    assert with_need, f"no case of the {DEFAULT_SET!r} set has the property {need!r} that {bug} needs to show"
    k = kernel(bug)
    caught = {c.id: v for c in CASES if (v := verdict(k, c)) is not None}
    assert caught, f"{bug} ({BUGS[bug]}) passes every case of the {DEFAULT_SET!r} set"
    assert set(caught) <= set(with_need), caught  # only where its property lets it show
    for case in CASES:
        if case.id in caught and case.call.n_q > 1:  # prefill is right: only the decode calls' rules fail
            assert set(caught[case.id].split(", ")) <= {"on_off_bound", "chunked_bound.chunk1"} or \
                caught[case.id].startswith("KernelError"), (case.id, caught[case.id])


def test_the_default_set_covers_every_property_of_the_full_table():
    have = set().union(*(c.properties for c in CASES))
    full = set().union(*(c.properties for c in kvconf.attention_cases("full")))
    assert full - have == set()
    assert {"heads.gqa", "mask.window", "scores.large", "scores.p_flush", "capacity.spare"} <= have
