"""The rules on the examples' kernels: torch SDPA passes every quick attention case; the buggy attention fails on the
cache-ON vs cache-OFF rule (and on the chunks of one row, which are decode calls) and nowhere else, with a message
that names the rule, the error, the bound and what it charges, the reference's error and the seed; the oracle and the
bounds are reachable for a user's own assertion."""
from fractions import Fraction

import pytest
import torch

import kvconf
from buggy_attention import BLOCK, buggy_attention, fixed_attention, scores_of
from sdpa_attention import no_softcap, sdpa_attention, sdpa_batched_decode, visible


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
        if case.call.n_kv <= BLOCK:  # one block of keys: nothing is rescaled, the decode is right
            assert kvconf.check_attention(k, case).passed
            continue
        report, failed_case = kvconf.check_attention(k, case), case
        assert {r.rule for r in report.failures} == {"on_off_bound", "chunked_bound.chunk1"}, report.message()
        assert report.rule("oracle_bound").passed and report.rule("unused_slots").passed
    with pytest.raises(kvconf.CheckFailed) as e:
        report.assert_pass()
    msg = str(e.value)
    r = report.rule("on_off_bound")
    assert f"python.buggy.f16 on {failed_case.id}: 2 of 7 rules failed" in msg
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


def fp16_accumulating_linear(x, w):
    """y = x @ w.T with the running sum rounded to fp16 after every term, as a kernel with an fp16 accumulator."""
    acc = torch.zeros(x.shape[0], w.shape[0], dtype=torch.float16)  # (m, n)
    for j in range(x.shape[1]):
        acc = (acc.float() + x[:, j:j + 1].float() * w[:, j].float()).half()
    return acc


def fp16_pv_attention(q, k_cache, v_cache, call):
    """Attention that accumulates P·V key by key in fp16 (as ggml's CPU flash attention does over an f16 cache):
    scores and softmax in fp32, acc = fl16(acc + p_j · v_j), divided by the row sum at the end."""
    n_q, heads, _ = q.shape
    rep = heads // call.n_kv_heads
    k = k_cache[:call.n_kv].repeat_interleave(rep, dim=1).transpose(0, 1)  # (H, n_kv, d)
    v = v_cache[:call.n_kv].repeat_interleave(rep, dim=1).transpose(0, 1)  # (H, n_kv, d_v)
    s = scores_of(q.transpose(0, 1), k, call)                              # (H, n_q, n_kv)
    m = s.amax(-1, keepdim=True).clamp_min(-3e38)                          # a row that sees no key: no NaN
    p = torch.exp(s - m)                                                   # (H, n_q, n_kv), 0 where masked
    acc = torch.zeros(heads, n_q, v.shape[-1], dtype=torch.float16)        # (H, n_q, d_v)
    for j in range(call.n_kv):
        acc = (acc.float() + p[:, :, j:j + 1] * v[:, j:j + 1].float()).half()
    row_sum = p.sum(-1, keepdim=True)
    o = torch.where(row_sum > 0, acc.float() / row_sum.clamp_min(1e-30), torch.zeros(()))
    return o.transpose(0, 1).to(q.dtype).contiguous()                      # (n_q, H, d_v)


def test_a_declared_fp16_accumulator_is_judged_by_it():
    """The same arithmetic passes when the kernel declares its accumulator (accumulate=, pv_accumulate=, as a plugin's
    acc and pv_acc) and fails the fp32-accumulation bound it would otherwise be held to: the declaration reaches the
    bound, and the bound still sees fp16 accumulation that is not declared."""
    failed = {"gemm": 0, "attention": 0}
    for declared in (True, False):
        g = kvconf.GemmKernel(fp16_accumulating_linear, dtype=torch.float16, name="acc16",
                              accumulate=torch.float16 if declared else torch.float32)
        a = kvconf.AttentionKernel(fp16_pv_attention, dtype=torch.float16, name="pv16",
                                   pv_accumulate=torch.float16 if declared else None)
        if declared:
            assert "products and sums in fp16" in g.describe_bound()
            assert "q·k in fp32 and PV in fp16" in a.describe_bound()
        for kernel, cases, check in ((g, kvconf.gemm_cases("quick"), kvconf.check_gemm),
                                     (a, kvconf.attention_cases("quick"),
                                      lambda k, c: kvconf.check_attention(k, c, rules=["oracle"]))):
            for case in cases:
                report = check(kernel, case)
                if declared:
                    report.assert_pass()
                else:
                    failed[kernel.kind] += not report.rule("oracle_bound").passed
    assert failed["gemm"] > 0 and failed["attention"] > 0, failed


def test_an_accumulator_narrower_than_the_inputs_is_refused():
    with pytest.raises(ValueError, match=r"accumulate='f16': expected a format with at least the significand bits of "
                                         r"the dtype \(f32\)"):
        kvconf.GemmKernel(fp16_accumulating_linear, dtype=torch.float32, accumulate=torch.float16)
    with pytest.raises(ValueError, match=r"pv_accumulate=torch.int8: expected torch.float32"):
        kvconf.AttentionKernel(fp16_pv_attention, dtype=torch.float16, pv_accumulate=torch.int8)


def test_exp2_scale_reaches_the_bound():
    """exp2_scale (the scale folded with log2 e, as PyTorch's CUDA SDPA backends do; kvconf.CUDA_FAST_MATH) charges the
    scale error 4u + 4u² instead of 2u + 2u²: every element's bound grows, none shrinks, and a check's headroom grows
    with it. Whether the C++ TorchCuda/ suites give the same bound bit for bit is Python/cuda's parity test (GPU)."""
    torch.manual_seed(4)
    call = kvconf.oracle.call(n_q=2, n_kv=24, n_heads=2, n_kv_heads=2, d=64)
    q, k, v = (torch.randn(n, 2, 64) for n in (2, 24, 24))
    plain = kvconf.bounds.attention(q, k, v, call, exp_error_ulps=64)
    folded = kvconf.bounds.attention(q, k, v, call, exp_error_ulps=64, exp2_scale=True)
    assert bool((folded >= plain).all()) and bool((folded > plain).any())
    case = kvconf.attention_cases("quick")[0]
    headroom = {}
    for props in ({"exp_error_ulps": 64}, kvconf.CUDA_FAST_MATH):
        kernel = kvconf.AttentionKernel(sdpa_attention, dtype=torch.float16, supports=no_softcap, **props)
        report = kvconf.check_attention(kernel, case, rules=["oracle"])
        headroom[kernel.exp2_scale] = report.rule("oracle_bound").headroom
    assert "scale folded with log2 e" in kernel.describe_bound()
    assert headroom[True] > headroom[False], headroom
    with pytest.raises(ValueError, match=r"exp2_scale='yes': expected True or False"):
        kvconf.AttentionKernel(sdpa_attention, dtype=torch.float16, exp2_scale="yes")


def row_attention(q, k_cache, v_cache, call, sequential_sums=False):
    """Attention one query row and head at a time over exactly the keys the row sees, in fp32: a row's arithmetic does
    not depend on the call (decode equals prefill bitwise, cache_invariant). sequential_sums adds the softmax's
    denominator one key after the other (cumsum) instead of torch's vectorised sum."""
    n_q, heads, _ = q.shape
    rep = heads // call.n_kv_heads
    see = visible(call, n_q, call.n_kv)                                     # (n_q, n_kv), contiguous per row
    out = torch.zeros(n_q, heads, v_cache.shape[-1])                        # (n_q, H, d_v)
    for i in range(n_q):
        keys = see[i].nonzero().flatten()
        lo, hi = int(keys[0]), int(keys[-1]) + 1
        for h in range(heads):
            k, v = k_cache[lo:hi, h // rep].float(), v_cache[lo:hi, h // rep].float()  # (n, d), (n, d_v)
            s = (k * q[i, h].float()).sum(-1) * call.scale                 # (n,)
            p = torch.exp(s - s.max())
            out[i, h] = (p[:, None] * v).sum(0) / (p.cumsum(0)[-1] if sequential_sums else p.sum())
    return out.to(q.dtype)


def test_batched_launches_are_checked_and_a_batch_dependent_order_is_caught():
    """The batch rule (issue 24's batch scenario for a kernel): SDPA with a padded batched decode launch passes it
    within the bounds; a row-at-a-time kernel claiming cache_invariant passes it bitwise when its batched launch
    computes each row as alone, and fails it, and only it, when the launch sums the softmax one key after the other once
    the batch holds 4 or more sequences (as a kernel choosing its reduction by batch size), on every quick case with
    more than one key."""
    sdpa = kvconf.AttentionKernel(sdpa_attention, dtype=torch.float16, exp_error_ulps=20, supports=no_softcap,
                                  batch_fn=sdpa_batched_decode)
    honest = kvconf.AttentionKernel(row_attention, dtype=torch.float32, name="rows", cache_invariant=True,
                                    supports=no_softcap, batch_fn=lambda b: [row_attention(*x) for x in b])
    planted = kvconf.AttentionKernel(row_attention, dtype=torch.float32, name="rows_by_batch", cache_invariant=True,
                                     supports=no_softcap,
                                     batch_fn=lambda b: [row_attention(*x, sequential_sums=len(b) >= 4) for x in b])
    caught = checked = 0
    for case in kvconf.attention_cases("quick"):
        if case.call.softcap > 0:
            continue
        report = kvconf.check_attention(sdpa, case, rules=["batch"])
        assert [r.rule for r in report] == ["batch_bound"] and report.passed, report.message()
        honest_report = kvconf.check_attention(honest, case)
        assert "batch_bitwise" in [r.rule for r in honest_report], honest_report.message()
        honest_report.assert_pass()
        failed = [r.rule for r in kvconf.check_attention(planted, case) if not r.passed]
        assert failed in ([], ["batch_bitwise"]), failed
        caught += failed == ["batch_bitwise"]
        checked += case.call.n_kv > 1  # one key: one term in the sum, no order to change
    assert caught == checked == 8, (caught, checked)  # in fp32 the denominator's last bit reaches the output


def test_the_batch_rule_needs_a_batched_launch():
    k = kvconf.AttentionKernel(sdpa_attention, dtype=torch.float16)
    assert "batch_bound" not in [r.rule for r in kvconf.check_attention(k, kvconf.attention_cases("quick")[0])]
    with pytest.raises(ValueError, match=r"rules: 'batch' needs a kernel with a batched launch"):
        kvconf.check_attention(k, kvconf.attention_cases("quick")[0], rules=["batch"])
    with pytest.raises(TypeError, match=r"batch_fn=3: expected None or a callable"):
        kvconf.AttentionKernel(sdpa_attention, dtype=torch.float16, batch_fn=3)
    bad = kvconf.AttentionKernel(sdpa_attention, dtype=torch.float16, batch_fn=lambda b: [])
    with pytest.raises(kvconf.KernelError, match=r"batch_fn returned list of 0, expected a list of 4 tensors"):
        kvconf.check_attention(bad, kvconf.attention_cases("quick")[0], rules=["batch"])


def test_a_declined_batched_launch_is_skipped_with_the_reason():
    """batch_supports declines a launch (as SDPA's CUDA flash backend declines a padded batch's mask): the batch rule
    asked alone reports the case skipped with the reason; among all the rules it is left out and the others run."""
    k = kvconf.AttentionKernel(sdpa_attention, dtype=torch.float16, exp_error_ulps=20, supports=no_softcap,
                               batch_fn=sdpa_batched_decode,
                               batch_supports=lambda calls: f"no padded batch of {len(calls)}")
    case = kvconf.attention_cases("quick")[0]
    report = kvconf.check_attention(k, case, rules=["batch"])
    assert report.skipped == "its batched launch of 4 sequences: no padded batch of 4", report.message()
    full = kvconf.check_attention(k, case)
    assert "batch_bound" not in [r.rule for r in full] and full.passed, full.message()
    with pytest.raises(TypeError, match=r"batch_supports=.*and a batch_fn to launch it"):
        kvconf.AttentionKernel(sdpa_attention, dtype=torch.float16, batch_supports=lambda calls: None)
    odd = kvconf.AttentionKernel(sdpa_attention, dtype=torch.float16, batch_fn=sdpa_batched_decode,
                                 batch_supports=lambda calls: 3)
    with pytest.raises(TypeError, match=r"batch_supports of python.sdpa_attention.f16 returned 3"):
        kvconf.check_attention(odd, case, rules=["batch"])
