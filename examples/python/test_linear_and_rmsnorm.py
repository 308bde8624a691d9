"""torch's linear and HF's RMSNorm on kvconf's GEMM, projection (decode row alone vs inside the prefix GEMM) and
RMSNorm cases, in fp32, fp16 and bf16."""

import pytest
import torch

import kvconf
import kvconf.pytest
from linear_and_rmsnorm import linear, rms_norm

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LINEAR = {d: kvconf.GemmKernel(linear, dtype=d, name="torch_linear") for d in DTYPES}
NORM = {d: kvconf.NormKernel(rms_norm, dtype=d, name="hf_rms_norm") for d in DTYPES}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@kvconf.pytest.gemm_cases()
def test_linear(dtype, kvconf_case, kvconf_verify):
    kvconf_verify(LINEAR[dtype], kvconf_case)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@kvconf.pytest.projection_cases()
def test_linear_decode_row(dtype, kvconf_case, kvconf_verify):
    kvconf_verify(LINEAR[dtype], kvconf_case)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@kvconf.pytest.norm_cases()
def test_rms_norm(dtype, kvconf_case, kvconf_verify):
    kvconf_verify(NORM[dtype], kvconf_case)
