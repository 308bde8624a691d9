"""The package's surface: its version is the C++ version, the case sets are the suites', the seeds are the suites'
(computed here independently), and results carry what a rule measured."""
import os

import pytest
import torch

import kvconf
import kvconf.pytest


def test_version_is_the_cxx_version():
    want = os.environ.get("KVCONF_CXX_VERSION")
    if want is None:
        pytest.skip("KVCONF_CXX_VERSION is set by CTest (python/tests/CMakeLists.txt)")
    assert kvconf.__version__ == want


def test_sets_nest_and_ids_resolve():
    quick, default, full = (kvconf.attention_cases(s) for s in ("quick", "default", "full"))
    assert 0 < len(quick) and 0 < len(default) < len(full)
    assert {c.id for c in default} <= {c.id for c in full}
    assert all(not c.slow for c in default) and any(c.slow for c in full)
    for c in quick + full:
        assert kvconf.attention_case(c.id).id == c.id
    # The GEMM default set has the decode reductions of the three models with their K tails.
    ks = {c.shape.k for c in kvconf.gemm_cases("default") if c.shape.m == 1}
    assert {11008, 2304, 14336} <= ks
    with pytest.raises(KeyError, match="no attention case 'nope'"):
        kvconf.attention_case("nope")
    with pytest.raises(ValueError, match="case_set='fast'"):
        kvconf.attention_cases("fast")


def test_set_is_a_deprecated_keyword_for_case_set():
    """docs/PYTHON.md named the case functions' argument set= before case_set= (the builtin's name): still taken, with a
    DeprecationWarning, by the case functions and the pytest decorators."""
    with pytest.warns(DeprecationWarning, match=r"attention_cases\(set=...\) is deprecated"):
        old = kvconf.attention_cases(set="default")
    assert [c.id for c in old] == [c.id for c in kvconf.attention_cases(case_set="default")]
    with pytest.warns(DeprecationWarning, match=r"use gemm_cases\(case_set=...\)"):
        mark = kvconf.pytest.gemm_cases(set="full")
    assert mark.kwargs == {"kind": "gemm", "case_set": "full"}
    with pytest.raises(TypeError, match="give it once"):
        kvconf.norm_cases("quick", set="full")


def fnv1a(text):
    h = 1469598103934665603
    for b in text.encode():
        h ^= b
        h = (h * 1099511628211) % 2**64
    return h


def test_seeds_are_the_suites(monkeypatch):
    monkeypatch.delenv("KVCONF_SEED", raising=False)
    case = kvconf.attention_cases("quick")[0]
    assert kvconf.seed_for("attention_oracle", case.id) == fnv1a("attention_oracle/" + case.id)
    from sdpa_attention import sdpa_attention
    k = kvconf.AttentionKernel(sdpa_attention, dtype=torch.float32, exp_error_ulps=20)
    report = kvconf.check_attention(k, case, rules=["oracle"])
    assert [r.seed for r in report] == [fnv1a("attention_oracle/" + case.id)] * 2
    report = kvconf.check_attention(k, case, rules=["on_off"], seed=7)
    assert [(r.rule, r.seed) for r in report] == [("on_off_bound", 7)]


def test_results_carry_rule_error_bound_headroom_seed_case():
    from sdpa_attention import sdpa_attention
    k = kvconf.AttentionKernel(sdpa_attention, dtype=torch.float16, exp_error_ulps=20, name="sdpa")
    case = kvconf.attention_cases("quick")[1]
    report = kvconf.check_attention(k, case)
    assert report.passed, report.message()
    assert [r.rule for r in report] == ["oracle_bound", "two_sided", "on_off_bound", "chunked_bound.chunk1",
                                        "chunked_bound.chunk4", "chunked_bound.chunk16", "unused_slots"]
    for r in report:
        assert r.case_id == case.id and r.kernel == "python.sdpa.f16"
        if r.rule != "unused_slots":
            assert 0 < r.bound and 0 <= r.error <= r.bound
            assert r.headroom == pytest.approx((r.bound - r.error) / r.bound)
    assert report.rule("two_sided").reference_error > 0


def test_the_numbers_of_a_result_are_fields():
    """Structured results: what a consumer needs is a field, not text to parse. The worst element's values reproduce the
    rule's error, two_sided's bound is built from the reference's error, and an on/off rule names both sides' paths."""
    from sdpa_attention import sdpa_attention
    k = kvconf.AttentionKernel(sdpa_attention, dtype=torch.float16, exp_error_ulps=20, name="sdpa")
    case = kvconf.attention_cases("quick")[1]
    report = kvconf.check_attention(k, case, rules=["oracle", "on_off"])
    oracle, two_sided, on_off = report.rule("oracle_bound"), report.rule("two_sided"), report.rule("on_off_bound")
    assert oracle.worst_index is not None and oracle.worst_value is not None and oracle.worst_expected is not None
    # the error is |kernel - oracle| at the worst element (the largest error over bound), rounded up once in double
    assert oracle.error == pytest.approx(abs(oracle.worst_value - oracle.worst_expected), rel=1e-12)
    assert two_sided.reference_error is not None and two_sided.reference_error > 0
    assert two_sided.bound >= 2 * two_sided.reference_error  # factor >= 2 times it, plus a floor of one ulp
    assert on_off.paths.count(" | ") == 1 and on_off.worst_index is not None
    assert on_off.error == pytest.approx(abs(on_off.worst_value - on_off.worst_expected), rel=1e-12)
    assert oracle.reference_error is None and oracle.paths == ""
    for r in kvconf.check_attention(k, case, rules=["chunked"]):  # every bounded comparison names its worst element
        assert r.worst_index is not None
        assert r.error == pytest.approx(abs(r.worst_value - r.worst_expected), rel=1e-12)
