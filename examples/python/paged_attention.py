"""A paged-cache attention as vLLM and FlashInfer lay out their KV cache: fixed-size pages in any physical order and a
block table per sequence. kvconf.paged(fn, page_size) hands fn kvconf's cache in that layout (pages shuffled, spare
pages and the rows past the cache full of NaN), so every attention rule checks the kernel as an engine calls it.
paged_sdpa_attention gathers the sequence's pages through its table and calls SDPA; unmapped_attention is the classic
bug of a kernel first tried with an allocator that hands out pages in order: it reads logical page i from physical
page i, ignoring the table. paged_decode_step is a batched decode step over one shared pool (kvconf.paged_batch);
longest_len_step reads every sequence to the longest one's length."""

import torch

from sdpa_attention import sdpa_attention, visible


def gather(pages, table, n):
    """pages (n_pages, page, H_kv, dim), table (pages,) -> (n, H_kv, dim): rows 0 .. n - 1 in logical order, from
    the pages holding them."""
    used = table[:-(-n // pages.shape[1])].long()
    return pages[used].reshape(-1, *pages.shape[2:])[:n]


def paged_sdpa_attention(q, k_pages, v_pages, block_table, call):
    """q (n_q, H, d); k_pages (n_pages, page, H_kv, d); v_pages (n_pages, page, H_kv, d_v); block_table (pages,)."""
    return sdpa_attention(q, gather(k_pages, block_table, call.n_kv), gather(v_pages, block_table, call.n_kv), call)


def unmapped_attention(q, k_pages, v_pages, block_table, call):
    """BUG: logical page i read from physical page i (block_table ignored)."""
    identity = torch.arange(len(block_table))
    return sdpa_attention(q, gather(k_pages, identity, call.n_kv), gather(v_pages, identity, call.n_kv), call)


def decode_row(q_row, k, v, call):
    """q_row (1, H, d); k (n, H_kv, d), v (n, H_kv, d_v): the rows a decode kernel loops over, all of them, masked as
    the call's causality and window say -> (1, H, d_v)."""
    rep = q_row.shape[1] // call.n_kv_heads
    kh, vh = (t.transpose(0, 1).repeat_interleave(rep, dim=0).unsqueeze(0) for t in (k, v))  # (1, H, n, dim)
    mask = visible(call, 1, k.shape[0]).to(q_row.device)                                      # (1, n)
    o = torch.nn.functional.scaled_dot_product_attention(q_row.transpose(0, 1).unsqueeze(0), kh, vh,
                                                         attn_mask=mask, scale=call.scale)   # (1, H, 1, d_v)
    return o[0].transpose(0, 1)                                                               # (1, H, d_v)


def paged_decode_step(q, k_pages, v_pages, block_tables, seq_lens, calls):
    """One decode step of B sequences over a shared page pool (kvconf.paged_batch, vLLM's layout): q (B, H, d);
    block_tables (B, max_pages); seq_lens (B,). Each sequence's pages gathered through its own row and its seq_len
    rows attended over -> (B, H, d_v)."""
    outs = []
    for b, call in enumerate(calls):
        n = int(seq_lens[b])
        outs.append(decode_row(q[b:b + 1], gather(k_pages, block_tables[b], n), gather(v_pages, block_tables[b], n),
                               call))
    return torch.cat(outs)


def longest_len_step(q, k_pages, v_pages, block_tables, seq_lens, calls):
    """BUG: every sequence read to the longest sequence's length (a kernel that takes max(seq_lens) for the loop
    bound and forgets its own length): the shorter ones read past their rows."""
    longest = int(seq_lens.max())
    return paged_decode_step(q, k_pages, v_pages, block_tables, torch.full_like(seq_lens, longest), calls)
