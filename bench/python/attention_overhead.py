"""Benchmark (not a test): the cost per attention case of kvconf's Python path over the C++ Torch/ path for the same
kernel, case and seed. The C++ side is conformance_torch_attention_oracle_test / _cache_test (libtorch's SDPA with a
forced backend, registered in kernels/torch), timed per GoogleTest case from its XML (process start-up excluded); the
Python side is kvconf.check_attention on the same SDPA backend through examples/python/sdpa_attention.py, timed per
call in this process. Each side runs `--repeat` times; the table gives the median per case and the ratio.
--device cuda:0 compares with the TorchCuda/ suites (conformance_torch_cuda_*) and adds what kvconf's copies cost per
case and per call (kernel.stats: inputs to the device, the synchronised call, the output back to the host).

    PYTHONPATH=build/python .venv/bin/python bench/python/attention_overhead.py --suites build/conformance/suites
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

import torch
from torch.nn.attention import SDPBackend

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "python"))
import kvconf  # noqa: E402
from sdpa_attention import forced, forced_supports  # noqa: E402

BACKENDS = {"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION}
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
# (C++ program after conformance_torch[_cuda]_, test, rules of check_attention it corresponds to)
PARTS = [("attention_oracle_test", "AttentionConformance.MatchesOracle", ["oracle"]),
         ("attention_cache_test", "AttentionConformance.*", ["on_off", "chunked", "unused_slots"])]


def sanitize(s):
    return re.sub(r"[^A-Za-z0-9]", "_", s)


def cxx_seconds(suites, exe, test, kernel, cases, suite):
    """{case id: seconds} summed over the GoogleTest cases of `test` for this kernel (one process)."""
    xml = os.path.join(tempfile.mkdtemp(), "t.xml")
    pattern = ":".join(f"{suite}/{test}/{sanitize(kernel)}__{sanitize(c.id)}" for c in cases)
    subprocess.run([os.path.join(suites, exe), f"--gtest_filter={pattern}", f"--gtest_output=xml:{xml}"],
                   check=True, capture_output=True)
    out = {}
    for tc in ET.parse(xml).getroot().iter("testcase"):
        cid = next(c.id for c in cases if tc.get("name").endswith(sanitize(c.id)))
        out[cid] = out.get(cid, 0.0) + float(tc.get("time"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suites", required=True, help="the build's conformance/suites folder")
    ap.add_argument("--backend", choices=BACKENDS, default="math")
    ap.add_argument("--dtype", choices=DTYPES, default="f16")
    ap.add_argument("--set", default="default", choices=("default",), help="the suites' fast cases (the Torch/ suites run no quick case)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", default="cpu", help="cpu (the Torch/ suites) or cuda:0 (the TorchCuda/ suites)")
    a = ap.parse_args()
    torch.set_num_threads(1)  # as kernels/torch runs libtorch
    cuda = a.device.startswith("cuda")
    if cuda:  # as kernels/torch/torch_ops.cpp sets them for its CUDA kernels
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(False)
    dtype = DTYPES[a.dtype]
    kernel = kvconf.AttentionKernel(forced(BACKENDS[a.backend]), dtype=dtype, device=a.device,
                                    supports=forced_supports(BACKENDS[a.backend], dtype, a.device),
                                    **(kvconf.CUDA_FAST_MATH if cuda else {"exp_error_ulps": 20}))
    cxx_name = f"torch.{'cuda.' if cuda else ''}attn.sdpa_{a.backend}.{a.dtype}"
    exe_prefix, suite = ("conformance_torch_cuda_", "TorchCuda") if cuda else ("conformance_torch_", "Torch")
    cases = [c for c in kvconf.attention_cases(a.set) if kernel._supports(c.call) is None]
    if not cases:
        sys.exit(f"attention_overhead.py: {cxx_name} on {a.device} takes no case of set {a.set}: "
                 f"{kernel._supports(kvconf.attention_cases(a.set)[0].call)}")
    print(f"kvconf {kvconf.__version__}, torch {torch.__version__}, {cxx_name} vs python.{kernel.user_name}."
          f"{a.dtype} on {a.device}, {len(cases)} cases of set {a.set} (those the backend takes), median of "
          f"{a.repeat}")
    print(f"{'case':58s} {'part':7s} {'C++ s':>9s} {'Python s':>9s} {'ratio':>6s}")
    totals = {"C++": 0.0, "Python": 0.0}
    for exe, test, rules in PARTS:
        cxx = [cxx_seconds(a.suites, exe_prefix + exe, test, cxx_name, cases, suite) for _ in range(a.repeat)]
        for c in cases:
            py = []
            for _ in range(a.repeat):
                t0 = time.perf_counter()
                kvconf.check_attention(kernel, c, rules=rules)  # timed, not judged: a known finding may fail
                py.append(time.perf_counter() - t0)
            c_s, p_s = statistics.median(r[c.id] for r in cxx), statistics.median(py)
            totals["C++"] += c_s
            totals["Python"] += p_s
            ratio = f"{p_s / c_s:6.2f}" if c_s > 0 else "     -"  # GoogleTest times have 1 ms resolution
            print(f"{c.id:58s} {rules[0]:7s} {c_s:9.4f} {p_s:9.4f} {ratio}")
    print(f"{'total':58s} {'':7s} {totals['C++']:9.4f} {totals['Python']:9.4f} "
          f"{totals['Python'] / totals['C++']:6.2f}")
    st = kernel.stats
    runs = a.repeat * len(cases)
    print(f"kvconf's copies and the calls (kernel.stats, {st['calls']} calls over {runs} case runs): "
          + ", ".join(f"{p} {st[p] / runs * 1e3:.3f} ms per case, {st[p] / st['calls'] * 1e6:.1f} us per call"
                      for p in ("to_device_s", "call_s", "to_host_s")))


if __name__ == "__main__":
    main()
