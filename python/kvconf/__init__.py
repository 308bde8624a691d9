"""kvconf from Python: kvconf's conformance rules on your own kernels (Python callables taking and returning torch
tensors), its MPFR oracle and bounds, and `kvconf check` on traces. The rules, cases, seeds and bounds are the C++
suites' own (the extension kvconf._core is built from the same libraries). docs/PYTHON.md.

    import torch, kvconf
    kernel = kvconf.AttentionKernel(my_attention, dtype=torch.float16)
    for case in kvconf.attention_cases("quick"):
        kvconf.check_attention(kernel, case).assert_pass()
"""

from . import _core, bounds, oracle
from ._checks import (
    ATTENTION_RULES,
    SETS,
    attention_case,
    attention_cases,
    check,
    check_attention,
    check_gemm,
    check_norm,
    check_projection,
    gemm_case,
    gemm_cases,
    norm_case,
    norm_cases,
    projection_case,
    projection_cases,
)
from ._kernel import CUDA_FAST_MATH, AttentionKernel, GemmKernel, KernelError, KernelTimeout, NormKernel
from ._results import CheckFailed, Report, Result
from ._traces import TraceCheck, check_traces
from .paged import paged, paged_batch

__version__ = _core.__version__

__all__ = ["AttentionKernel", "GemmKernel", "NormKernel", "KernelError", "KernelTimeout", "CheckFailed", "Report",
           "Result", "TraceCheck", "attention_cases", "gemm_cases", "projection_cases", "norm_cases",
           "attention_case", "gemm_case", "projection_case", "norm_case", "check", "check_attention", "check_gemm",
           "check_projection", "check_norm", "check_traces", "bounds", "oracle", "paged", "paged_batch", "seed_for",
           "SETS", "ATTENTION_RULES", "CUDA_FAST_MATH", "__version__"]


def seed_for(rule: str, case_id: str) -> int:
    """The seed the suites use for (rule, case id): FNV-1a of "rule/id" (KVCONF_SEED overrides it)."""
    return _core.seed_for(rule, case_id)
