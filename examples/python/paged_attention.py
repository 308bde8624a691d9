"""A paged-cache attention as vLLM and FlashInfer lay out their KV cache: fixed-size pages in any physical order and a
block table per sequence. kvconf.paged(fn, page_size) hands fn kvconf's cache in that layout (pages shuffled, spare
pages and the rows past the cache full of NaN), so every attention rule checks the kernel as an engine calls it.
paged_sdpa_attention gathers the sequence's pages through its table and calls SDPA; unmapped_attention is the classic
bug of a kernel first tried with an allocator that hands out pages in order: it reads logical page i from physical
page i, ignoring the table."""

from sdpa_attention import sdpa_attention


def pages_needed(call, page_size):
    return -(-call.n_kv // page_size)  # the pages holding rows 0 .. n_kv - 1


def paged_sdpa_attention(q, k_pages, v_pages, block_table, call):
    """q (n_q, H, d); k_pages (n_pages, page, H_kv, d); v_pages (n_pages, page, H_kv, d_v); block_table (pages,)."""
    used = block_table[:pages_needed(call, k_pages.shape[1])].long()

    def gather(pages):  # -> (n_kv, H_kv, dim): the sequence's rows in logical order
        return pages[used].reshape(-1, *pages.shape[2:])[:call.n_kv]
    return sdpa_attention(q, gather(k_pages), gather(v_pages), call)


def unmapped_attention(q, k_pages, v_pages, block_table, call):
    """BUG: logical page i read from physical page i (block_table ignored)."""
    n = pages_needed(call, k_pages.shape[1])

    def gather(pages):
        return pages[:n].reshape(-1, *pages.shape[2:])[:call.n_kv]
    return sdpa_attention(q, gather(k_pages), gather(v_pages), call)
