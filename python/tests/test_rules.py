"""The rules on the examples' kernels: torch SDPA passes every quick attention case; the buggy attention fails on the
cache-ON vs cache-OFF rule (and on the chunks of one row, which are decode calls) and nowhere else, with a message
that names the rule, the error, the bound and what it charges, the reference's error and the seed; the oracle and the
bounds are reachable for a user's own assertion."""
from fractions import Fraction

import pytest
import torch

import kvconf
from buggy_attention import buggy_attention, fixed_attention
from sdpa_attention import no_softcap, sdpa_attention


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_sdpa_passes_every_quick_case(dtype):
    k = kvconf.AttentionKernel(sdpa_attention, dtype=dtype, exp_error_ulps=20, supports=no_softcap)
    ran = 0
    for case in kvconf.attention_cases("quick"):
        report = kvconf.check_attention(k, case)
        if report.skipped:
            assert case.call.softcap > 0, report.message()
            continue
        report.assert_pass()
        ran += 1
    assert ran == len(kvconf.attention_cases("quick")) - 1  # one quick case has Gemma-2's softcap


def test_buggy_attention_fails_on_the_decode_rules_only():
    k = kvconf.AttentionKernel(buggy_attention, dtype=torch.float16, name="buggy")
    for case in kvconf.attention_cases("quick"):
        report = kvconf.check_attention(k, case)
        assert {r.rule for r in report.failures} == {"on_off_bound", "chunked_bound.chunk1"}, report.message()
        assert report.rule("oracle_bound").passed and report.rule("unused_slots").passed
    with pytest.raises(kvconf.CheckFailed) as e:
        report.assert_pass()
    msg = str(e.value)
    r = report.rule("on_off_bound")
    assert f"python.buggy.f16 on {case.id}: 2 of 7 rules failed" in msg
    assert f"on_off_bound FAILED: error {r.error:.6g} exceeds bound {r.bound:.6g}" in msg
    assert "the bound: black-box attention bound" in msg and "exp error 1 fp32 ulp" in msg
    assert f"seed {r.seed}" in msg and "reproduce: kvconf.check_attention(" in msg
    assert "decode pipeline=python black-box" in msg  # the detail: where, on and off values


def test_the_fix_passes():
    """With the rescale's sign right the same code passes every rule in fp16 and fp32: the failure is the bug's."""
    for dtype in (torch.float16, torch.float32):
        k = kvconf.AttentionKernel(fixed_attention, dtype=dtype, name="fixed")
        for case in kvconf.attention_cases("quick"):
            kvconf.check_attention(k, case).assert_pass()


def test_two_sided_message_names_the_reference_error():
    """A kernel that adds 4 ulps of error to every output fails two_sided, whose message gives the reference's error."""
    def sloppy(q, k_cache, v_cache, call):
        o = sdpa_attention(q.float(), k_cache.float(), v_cache.float(), call)
        return (o * (1 + 2.0**-9)).to(q.dtype)
    k = kvconf.AttentionKernel(sloppy, dtype=torch.float16, name="sloppy", exp_error_ulps=20)
    report = kvconf.check_attention(k, kvconf.attention_cases("quick")[0], rules=["oracle"])
    assert not report.rule("two_sided").passed
    assert "the naive same-precision reference's error on this case" in report.message()


def exact(x):
    return Fraction(float(x))


def test_oracle_dot_is_exact():
    torch.manual_seed(1)
    x = torch.randn(1000).to(torch.float16)
    y = torch.randn(1000).to(torch.float16)
    want = sum(exact(a) * exact(b) for a, b in zip(x.tolist(), y.tolist()))
    d = kvconf.oracle.dot(x, y)
    assert Fraction(d.exact) == Fraction(float(want))  # the exact sum, rounded to the nearest double
    assert d.abs_sum >= float(sum(abs(exact(a) * exact(b)) for a, b in zip(x.tolist(), y.tolist())))
    assert d.rounded == float(torch.tensor(float(want)).to(torch.float16))
    with pytest.raises(ValueError):
        kvconf.oracle.dot(torch.tensor([0.1]), torch.tensor([1.0]), format="f16")  # 0.1 is no fp16 value


def test_bounds_hold_for_sdpa_on_your_own_inputs():
    torch.manual_seed(2)
    call = kvconf.oracle.call(n_q=3, n_kv=40, n_heads=4, n_kv_heads=2, d=64)
    q = torch.randn(3, 4, 64).to(torch.float16)
    k = torch.randn(40, 2, 64).to(torch.float16)
    v = torch.randn(40, 2, 64).to(torch.float16)
    out = sdpa_attention(q, k, v, call).double()
    ref = kvconf.oracle.attention(q, k, v, call)
    bound = kvconf.bounds.attention(q, k, v, call, exp_error_ulps=20)
    err = (out - ref.exact).abs()
    assert bool((err <= bound).all()) and float(err.max()) > 0
    x = torch.randn(5, 300).to(torch.bfloat16)
    w = torch.randn(7, 300).to(torch.bfloat16)
    g = kvconf.oracle.gemm(x, w)
    assert bool(((torch.nn.functional.linear(x, w).double() - g.exact).abs() <= kvconf.bounds.gemm(x, w)).all())
