"""PyTorch's SDPA as an engine calls it, on kvconf's attention cases (--kvconf-set, default quick), in fp32, fp16 and
bf16: every rule passes. Its CPU flash kernel uses a 20-ulp exp (exp_u20) that may flush below 2^-125: stated."""

import pytest
import torch

import kvconf
import kvconf.pytest
from sdpa_attention import no_softcap, sdpa_attention

DEVICE = "cpu"

KERNELS = {dtype: kvconf.AttentionKernel(sdpa_attention, dtype=dtype, device=DEVICE, name="torch_sdpa",
                                         exp_error_ulps=20, flush_exp=True, supports=no_softcap,
                                         mirrors="torch.nn.functional.scaled_dot_product_attention")
           for dtype in (torch.float32, torch.float16, torch.bfloat16)}


@pytest.mark.parametrize("dtype", KERNELS, ids=str)
@kvconf.pytest.attention_cases()
def test_sdpa(dtype, kvconf_case, kvconf_verify):
    kvconf_verify(KERNELS[dtype], kvconf_case)
