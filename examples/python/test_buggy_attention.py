"""The buggy attention (buggy_attention.py: a sign error in the decode path's online-softmax rescale) judged by
kvconf in fp16: its prefill passes the oracle, its decode path breaks the cache-ON vs cache-OFF rule. Expected to fail
(xfail, strict: the run goes red if kvconf stops catching it) on every case whose decode calls walk more than one block
of keys, and to pass where they cannot (one block: nothing is rescaled, the kernel computes softmax exactly, and kvconf
must not flag it). Where the scores span a wide range, the wrong factor overflows to inf and the decode row comes out
NaN: kvconf reports that as a KernelError (NaN from finite inputs) before any rule. Run with -rx to read kvconf's
message."""

import pytest
import torch

import kvconf
import kvconf.pytest
from buggy_attention import BLOCK, buggy_attention

KERNEL = kvconf.AttentionKernel(buggy_attention, dtype=torch.float16, name="buggy_attention")


CAUGHT = pytest.mark.xfail(
    raises=(kvconf.CheckFailed, kvconf.KernelError), strict=True,
    reason="decode rescales by exp(m_new - m_old): on_off_bound (or, where scores span a wide range, NaN from finite "
           "inputs)")


def walks_several_blocks(case):
    """Whether the case's decode calls (one query row over the cache) see more than one block of BLOCK keys."""
    return case.call.n_kv > BLOCK


@kvconf.pytest.attention_cases()
def test_buggy_attention(kvconf_case, kvconf_verify, request):
    if walks_several_blocks(kvconf_case):
        request.applymarker(CAUGHT)
    kvconf_verify(KERNEL, kvconf_case)


def test_only_the_decode_rules_catch_it():
    """On every quick case whose decode calls walk several blocks: the oracle, unused-slot and multi-row chunk rules
    pass; on_off_bound and the chunks of one row (decode calls) fail."""
    for case in filter(walks_several_blocks, kvconf.attention_cases("quick")):
        report = kvconf.check_attention(KERNEL, case)
        failed = {r.rule for r in report.failures}
        assert failed == {"on_off_bound", "chunked_bound.chunk1"}, report.message()
