"""A paged kernel through kvconf.paged: the one that follows its block table passes every rule at page sizes 1, 16
and 64; the one that ignores it is caught on every case: on the quick ones it reads spare pages, whose NaN
kvconf.paged reports as a read outside the block table; wrong pages that are not spare fail the oracle. A batched
decode step over one shared pool (kvconf.paged_batch) passes every rule; one that reads every sequence to the longest
one's length is right alone and caught by the batch rule."""

import pytest
import torch

import kvconf
import kvconf.pytest
from paged_attention import longest_len_step, paged_decode_step, paged_sdpa_attention, unmapped_attention
from sdpa_attention import no_softcap

PAGED = {page: kvconf.AttentionKernel(kvconf.paged(paged_sdpa_attention, page_size=page), dtype=torch.float16,
                                      name=f"paged{page}", exp_error_ulps=20, supports=no_softcap)
         for page in (1, 16, 64)}
STEP = kvconf.AttentionKernel(kvconf.paged(paged_sdpa_attention, page_size=16), dtype=torch.float16,
                              name="paged_step", exp_error_ulps=20, supports=no_softcap,
                              batch_fn=kvconf.paged_batch(paged_decode_step, 16))
LONGEST = kvconf.AttentionKernel(kvconf.paged(paged_sdpa_attention, page_size=16), dtype=torch.float16,
                                 name="longest", exp_error_ulps=20, supports=no_softcap,
                                 batch_fn=kvconf.paged_batch(longest_len_step, 16))
UNMAPPED = kvconf.AttentionKernel(kvconf.paged(unmapped_attention, page_size=16), dtype=torch.float16,
                                  name="unmapped", exp_error_ulps=20, supports=no_softcap)


@pytest.mark.parametrize("page", PAGED)
@kvconf.pytest.attention_cases()
def test_paged_sdpa(page, kvconf_case, kvconf_verify):
    kvconf_verify(PAGED[page], kvconf_case)


@kvconf.pytest.attention_cases()
def test_ignoring_the_block_table_is_caught(kvconf_case):
    if no_softcap(kvconf_case.call):
        pytest.skip(no_softcap(kvconf_case.call))
    try:
        report = kvconf.check_attention(UNMAPPED, kvconf_case)
    except kvconf.KernelError as e:  # on the quick cases: a spare page's NaN
        assert "it read a page its block_table does not give it" in str(e), e
        return
    assert not report.passed, report.message()  # wrong pages that are not spare: the oracle


@kvconf.pytest.attention_cases()
def test_a_paged_decode_step_over_a_shared_pool(kvconf_case, kvconf_verify):
    kvconf_verify(STEP, kvconf_case)  # every rule, the batch rule over the shared pool included


@kvconf.pytest.attention_cases()
def test_reading_to_the_longest_length_is_caught_by_the_batch_rule(kvconf_case):
    if no_softcap(kvconf_case.call):
        pytest.skip(no_softcap(kvconf_case.call))
    assert kvconf.check_attention(LONGEST, kvconf_case, rules=["oracle", "on_off"]).passed  # one sequence: right
    with pytest.raises(kvconf.KernelError, match="it read a page its block_tables row does not give it"):
        kvconf.check_attention(LONGEST, kvconf_case, rules=["batch"])
