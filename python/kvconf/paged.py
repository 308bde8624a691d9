"""A paged KV cache, as vLLM's and FlashInfer's attention kernels take it: kvconf's contiguous cache scattered into
fixed-size pages in a shuffled physical order, with a block table, so that a paged kernel is checked by every
attention rule as it is called in an engine. Rows past the cache's capacity and spare pages hold NaN, so a kernel
that reads a page it was not given, or past the last filled row, poisons its output (the unused-slot rule, and the
NaN-from-finite-inputs check, name it).

    kernel = kvconf.AttentionKernel(kvconf.paged(my_paged_attention, page_size=16), dtype=torch.float16)

my_paged_attention(q, k_pages, v_pages, block_table, call) -> out: q (n_q, H, d); k_pages (n_pages, page_size, H_kv, d);
v_pages (n_pages, page_size, H_kv, d_v); block_table (ceil(capacity / page_size),) int32, the physical page of each
logical page (logical row r is row r % page_size of page block_table[r // page_size]); out (n_q, H, d_v).
"""

from __future__ import annotations

from ._kernel import _torch

SPARE_PAGES = 2  # physical pages no sequence owns, full of NaN


def _cycle(n, g):
    """A random permutation of range(n) that is one cycle (Sattolo's algorithm): no page is where it would be without
    the table, so a kernel that ignores the block table reads a wrong page for every logical page."""
    torch = _torch()
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        j = int(torch.randint(0, i, (1,), generator=g))
        order[i], order[j] = order[j], order[i]
    return order


def pages_of(k_cache, v_cache, page_size, seed=0):
    """(k_pages, v_pages, block_table) for a contiguous cache (capacity, H_kv, dim): pages in a shuffled physical order
    (one cycle, seeded by `seed` and the page count), NaN past capacity and in SPARE_PAGES spare pages."""
    torch = _torch()
    capacity = k_cache.shape[0]
    logical = -(-capacity // page_size)
    physical = logical + SPARE_PAGES
    g = torch.Generator().manual_seed(seed * 1_000_003 + physical)
    block_table = torch.tensor(_cycle(physical, g)[:logical], dtype=torch.int32)  # logical page -> physical page

    def scatter(c):  # (capacity, H_kv, dim) -> (physical, page_size, H_kv, dim)
        rows = torch.full((logical * page_size,) + tuple(c.shape[1:]), float("nan"), dtype=c.dtype, device=c.device)
        rows[:capacity] = c
        pages = torch.full((physical, page_size) + tuple(c.shape[1:]), float("nan"), dtype=c.dtype, device=c.device)
        pages[block_table.long().to(c.device)] = rows.view(logical, page_size, *c.shape[1:])
        return pages
    return scatter(k_cache), scatter(v_cache), block_table.to(k_cache.device)


def paged(fn, page_size=16, seed=0):
    """An attention callable of AttentionKernel's form around fn(q, k_pages, v_pages, block_table, call)."""
    if isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= 4096:
        raise ValueError(f"page_size={page_size!r}: expected an int from 1 to 4096")
    if not callable(fn):
        raise TypeError(f"fn={fn!r}: expected a callable fn(q, k_pages, v_pages, block_table, call)")

    def attention(q, k_cache, v_cache, call):
        torch = _torch()
        k_pages, v_pages, block_table = pages_of(k_cache, v_cache, page_size, seed)
        out = fn(q, k_pages, v_pages, block_table, call)
        n = call.n_kv
        if (isinstance(out, torch.Tensor) and bool(torch.isnan(out).any()) and bool(torch.isfinite(q).all())
                and bool(torch.isfinite(k_cache[:n]).all()) and bool(torch.isfinite(v_cache[:n]).all())):
            raise ValueError(f"NaN in the output while the rows 0 .. {n - 1} it may read are finite: it read a page "
                             f"its block_table does not give it, or a row past n_kv = {n} (kvconf.paged fills spare "
                             f"pages and the rows past the cache with NaN)")
        return out
    attention.__name__ = f"paged{page_size}_{getattr(fn, '__name__', 'kernel')}"
    return attention
