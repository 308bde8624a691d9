"""Bad input gets a Python exception naming the argument and what was expected; a kernel that misbehaves gets a
KernelError naming the kernel, the case and what it did; nothing crashes, hangs or returns numbers silently."""
import os
import time

import pytest
import torch

import kvconf
from sdpa_attention import sdpa_attention

CASE = None


def case():
    return kvconf.attention_cases("quick")[0]


# A device that looks like CUDA to kvconf (the simulated CUDA errors below: no GPU needed).
CUDA_LIKE = type("CudaLike", (), {"type": "cuda", "index": 0, "__str__": lambda s: "cuda:0"})()


def kernel(fn, **kw):
    kw.setdefault("dtype", torch.float16)
    return kvconf.AttentionKernel(fn, name="bad", **kw)


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"dtype=torch.int32: expected torch.float32, torch.float16 or torch.bfloat16"):
        kernel(sdpa_attention, dtype=torch.int32)
    with pytest.raises(ValueError, match="device='tpu'"):
        kernel(sdpa_attention, device="tpu")
    with pytest.raises(TypeError, match="fn=3: expected a callable"):
        kvconf.AttentionKernel(3, dtype=torch.float16)
    with pytest.raises(ValueError, match="exp_error_ulps=-1"):
        kernel(sdpa_attention, exp_error_ulps=-1)
    with pytest.raises(ValueError, match="timeout_s=0"):
        kernel(sdpa_attention, timeout_s=0)
    with pytest.raises(ValueError, match="rules: unknown rule 'oracel'"):
        kvconf.check_attention(kernel(sdpa_attention), case(), rules=["oracel"])
    with pytest.raises(ValueError, match="seed=-1"):
        kvconf.check_attention(kernel(sdpa_attention), case(), seed=-1)
    with pytest.raises(TypeError, match="check_gemm: kernel=.*expected a kvconf.GemmKernel"):
        kvconf.check_gemm(kernel(sdpa_attention), kvconf.gemm_cases()[0])
    with pytest.raises(TypeError, match="expected a kvconf case"):
        kvconf.check(kernel(sdpa_attention), "q4_kv16")


@pytest.mark.parametrize("returns, message", [
    (lambda q, o: o.float(), r"returned dtype torch.float32, expected torch.float16"),
    (lambda q, o: o[:, :1], r"returned shape \(4, 1, 64\), expected \(4, 4, 64\)"),
    (lambda q, o: o.tolist(), r"returned list, expected a torch.Tensor of shape \(4, 4, 64\)"),
    (lambda q, o: o.to("meta"), r"returned a tensor on meta, expected cpu"),
    (lambda q, o: o.transpose(0, 1).contiguous().transpose(0, 1), r"returned a non-contiguous tensor"),
    (lambda q, o: q, r"the output aliases the input q"),
    (lambda q, o: torch.full_like(o, float("nan")), r"returned nan at flat index 0 \(shape \(4, 4, 64\)\) from finite"),
    (lambda q, o: torch.full_like(o, float("inf")), r"returned inf at flat index 0"),
])
def test_a_bad_result_is_named(returns, message):
    k = kernel(lambda q, kc, vc, call: returns(q, sdpa_attention(q, kc, vc, call)))
    with pytest.raises(kvconf.KernelError, match=f"kernel python.bad.f16 on case {case().id}: .*{message}"):
        kvconf.check_attention(k, case(), rules=["oracle"])


def test_a_raising_callable_is_named_and_chained():
    def boom(q, kc, vc, call):
        raise ZeroDivisionError("no")
    with pytest.raises(kvconf.KernelError, match="the callable raised ZeroDivisionError: no") as e:
        kvconf.check_attention(kernel(boom), case())
    assert isinstance(e.value.__cause__, ZeroDivisionError)


def test_a_hanging_callable_times_out():
    def hang(q, kc, vc, call):
        while True:
            time.sleep(0.01)
    t0 = time.monotonic()
    with pytest.raises(kvconf.KernelTimeout, match=r"no result after 0.5 s \(timeout_s=0.5\)"):
        kvconf.check_attention(kernel(hang, timeout_s=0.5), case())
    assert time.monotonic() - t0 < 30
    time.sleep(1.2)  # past twice the limit: the last-resort watchdog was disarmed with the call (else no test after)


STUCK = """
import re, sys, torch, kvconf
sys.path.insert(0, {examples!r})
from sdpa_attention import sdpa_attention
def stuck_in_c(q, kc, vc, call):
    {body}
    return sdpa_attention(q, kc, vc, call)
case = kvconf.attention_cases("quick")[0]
kvconf.check_attention(kvconf.AttentionKernel(stuck_in_c, dtype=torch.float16, name="stuck", timeout_s=0.3), case)
print("returned")
"""


@pytest.mark.parametrize("body, gil", [
    ("sum(range(10**10))", "held"),  # one C loop holding the GIL and checking no signal (13.6 s for 10**9 here)
    # one long ATen call, GIL released: 60 squarings of 2048 x 2048, about 7 s on one thread (0.11 s each). The
    # former 1024 x 1024 to 2**40 took 0.6 s on an idle core and once returned before the 0.65 s watchdog: the test
    # then saw an ordinary timeout instead
    ("torch.linalg.matrix_power(torch.rand(2048, 2048), 2**60)", "released"),
])
def test_a_call_stuck_inside_c_ends_the_process_saying_where(body, gil):
    """SIGALRM cannot interrupt a call that never returns to the interpreter (a hung CUDA kernel in synchronize): at
    twice timeout_s the process ends with status 1 and faulthandler's traceback through the kernel, and, where the call
    released the GIL, a line naming the kernel, the case and the limit."""
    import subprocess
    import sys
    examples = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python")
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", STUCK.format(examples=os.path.abspath(examples), body=body)],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 1 and "returned" not in done.stdout, (done.returncode, done.stdout, done.stderr[-3000:])
    assert time.monotonic() - t0 < 60
    assert "Timeout (0:00:00.65" in done.stderr and 'line 6 in stuck_in_c' in done.stderr, done.stderr[-3000:]
    named = (f"kvconf: kernel python.stuck.f16 on case {kvconf.attention_cases('quick')[0].id}: still inside one call "
             f"after 0.6 s (timeout_s=0.3), where the timeout cannot interrupt it; ending the process")
    assert (named in done.stderr) == (gil == "released"), done.stderr[-3000:]


def test_cuda_without_a_device_skips_with_the_reason():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the CUDA path runs (docs/GPU.md)")
    k = kernel(sdpa_attention, device="cuda:0")
    report = kvconf.check_attention(k, case())
    assert report.skipped and "torch.cuda.is_available() is False" in report.skipped and not report.passed
    with pytest.raises(kvconf.CheckFailed, match="skipped: device cuda:0"):
        report.assert_pass()


def test_a_broken_cuda_context_is_reported_on_every_later_case(monkeypatch):
    """A CUDA error (simulated: a CPU kernel raising the error text torch raises, on a kernel marked as CUDA) fails its
    case with that error and every later case on the device with 'not run: ... unusable since case X'."""
    from kvconf import _kernel
    monkeypatch.setattr(_kernel, "_broken_cuda", {})
    k = kernel(lambda q, kc, vc, call: (_ for _ in ()).throw(RuntimeError("CUDA error: an illegal memory access")))
    monkeypatch.setattr(k, "device", torch.device("cpu"))
    monkeypatch.setattr(_kernel, "_is_cuda_error", lambda e: True)
    orig_invoke = k._invoke

    def invoke(args, kwargs):
        real = k.device
        k.device = CUDA_LIKE
        try:
            return orig_invoke(args, kwargs)
        finally:
            k.device = real
    monkeypatch.setattr(k, "_invoke", invoke)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: None)
    first, second = kvconf.attention_cases("quick")[:2]
    with pytest.raises(kvconf.KernelError, match="illegal memory access"):
        kvconf.check_attention(k, first)
    with pytest.raises(kvconf.KernelError, match=f"not run: the CUDA context on cuda:0 is unusable since case "
                                                 f"{first.id} failed with: RuntimeError: CUDA error"):
        kvconf.check_attention(k, second)


def test_a_cuda_error_in_kvconfs_own_copies_fails_the_case_and_later_ones(monkeypatch):
    """After a device-side assert every CUDA call raises the same sticky error, kvconf's input copies included: the
    case whose copy raised fails with 'CUDA error while copying ...', and later cases say the context is unusable since
    that case (instead of a bare CUDA error that names no case). Simulated as above: a device that looks like CUDA."""
    from kvconf import _kernel
    monkeypatch.setattr(_kernel, "_broken_cuda", {})
    k = kernel(sdpa_attention)
    monkeypatch.setattr(k, "device", CUDA_LIKE)
    monkeypatch.setattr(k, "_device_reason", lambda: None)

    def sticky(flat, shape):
        raise RuntimeError("CUDA error: device-side assert triggered")
    monkeypatch.setattr(k, "_to_device", sticky)
    first, second = kvconf.attention_cases("quick")[:2]
    with pytest.raises(kvconf.KernelError, match=f"on case {first.id}: CUDA error while copying the inputs to the "
                                                 f"device: RuntimeError: CUDA error: device-side assert"):
        kvconf.check_attention(k, first)
    with pytest.raises(kvconf.KernelError, match=f"on case {second.id}: not run: the CUDA context on cuda:0 is "
                                                 f"unusable since case {first.id} failed with: RuntimeError"):
        kvconf.check_attention(k, second)


def test_bad_paged_layouts_are_refused():
    with pytest.raises(ValueError, match=r"page_size=0: expected an int from 1 to 4096"):
        kvconf.paged(sdpa_attention, page_size=0)
    with pytest.raises(TypeError, match=r"fn=3: expected a callable fn\(q, k_pages, v_pages, block_table, call\)"):
        kvconf.paged(3)
    with pytest.raises(TypeError,
                       match=r"expected a callable fn\(q, k_pages, v_pages, block_tables, seq_lens, calls\)"):
        kvconf.paged_batch(None)


def test_bad_trace_files_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="on='nope.on': no such trace file"):
        kvconf.check_traces("nope.on", "nope.off")
    bad = tmp_path / "bad.on"
    bad.write_bytes(b"not a trace")
    with pytest.raises(ValueError, match="bad.on"):
        kvconf.check_traces(bad, bad, out=tmp_path / "out")
