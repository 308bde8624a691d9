"""The buggy attention (buggy_attention.py: a sign error in the decode path's online-softmax rescale) judged by
kvconf in fp16: its prefill passes the oracle, its decode path breaks the cache-ON vs cache-OFF rule. Expected to fail (xfail, strict: the run goes red if kvconf stops catching
it); run with -rx to read kvconf's message."""

import pytest
import torch

import kvconf
import kvconf.pytest
from buggy_attention import buggy_attention

KERNEL = kvconf.AttentionKernel(buggy_attention, dtype=torch.float16, name="buggy_attention")


@pytest.mark.xfail(raises=kvconf.CheckFailed, strict=True, reason="decode rescales by exp(m_new - m_old) (on_off_bound)")
@kvconf.pytest.attention_cases()
def test_buggy_attention(kvconf_case, kvconf_verify):
    kvconf_verify(KERNEL, kvconf_case)


def test_only_the_decode_rules_catch_it():
    """On every quick case: the oracle, unused-slot and multi-row chunk rules pass; on_off_bound and the chunks of one
    row (decode calls) fail."""
    for case in kvconf.attention_cases("quick"):
        report = kvconf.check_attention(KERNEL, case)
        failed = {r.rule for r in report.failures}
        assert failed == {"on_off_bound", "chunked_bound.chunk1"}, report.message()
