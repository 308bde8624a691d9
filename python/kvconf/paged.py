"""A paged KV cache, as vLLM's and FlashInfer's attention kernels take it: kvconf's contiguous cache scattered into
fixed-size pages in a shuffled physical order, with a block table, so that a paged kernel is checked by every
attention rule as it is called in an engine. Rows past the cache's capacity and spare pages hold NaN, so a kernel
that reads a page it was not given, or past the last filled row, poisons its output (the unused-slot rule, and the
NaN-from-finite-inputs check, name it).

    kernel = kvconf.AttentionKernel(kvconf.paged(my_paged_attention, page_size=16), dtype=torch.float16)

my_paged_attention(q, k_pages, v_pages, block_table, call) -> out: q (n_q, H, d); k_pages (n_pages, page_size, H_kv, d);
v_pages (n_pages, page_size, H_kv, d_v); block_table (ceil(capacity / page_size),) int32, the physical page of each
logical page (logical row r is row r % page_size of page block_table[r // page_size]); out (n_q, H, d_v).

A batched decode step over one shared page pool, as vLLM's paged attention takes it (AttentionKernel's batch_fn):

    kernel = kvconf.AttentionKernel(kvconf.paged(one, 16), batch_fn=kvconf.paged_batch(step, 16), ...)

step(q, k_pages, v_pages, block_tables, seq_lens, calls) -> out: q (B, H, d), one decode row per sequence; the pages
shared by all B sequences; block_tables (B, max_pages) int32, a sequence's unused entries pointing at a spare (NaN)
page; seq_lens (B,) int32, each sequence's n_kv; calls the B AttentionCalls (q_offset, window, scale, ...);
out (B, H, d_v).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from . import _core
from ._kernel import AttentionFn, BatchFn, BatchItem, _torch

if TYPE_CHECKING:
    import torch
    from torch import Tensor

SPARE_PAGES = 2  # physical pages no sequence owns, full of NaN

# fn(q, k_pages, v_pages, block_table, call) -> out, and the batched step(q, k_pages, v_pages, block_tables, seq_lens,
# calls) -> out (the module's docstring).
PagedFn = Callable[["Tensor", "Tensor", "Tensor", "Tensor", _core.AttentionCall], "Tensor"]
PagedBatchFn = Callable[["Tensor", "Tensor", "Tensor", "Tensor", "Tensor", list[_core.AttentionCall]], "Tensor"]


def _cycle(n: int, g: torch.Generator) -> list[int]:
    """A random permutation of range(n), n >= 2, that is one cycle (Sattolo's algorithm, drawn from generator g): a
    bijection with no fixed point, so no page is where it would be without the table and a kernel that ignores the
    block table reads a wrong page for every logical page."""
    import torch
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        j = int(torch.randint(0, i, (1,), generator=g))
        order[i], order[j] = order[j], order[i]
    return order


def pool_of(caches: Sequence[tuple[Tensor, Tensor]], page_size: int, seed: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    """One page pool for several contiguous caches [(k_cache, v_cache)], each (capacity_b, H_kv, dim): their pages in
    a shuffled physical order (one cycle, seeded by `seed` and the page count), NaN past each capacity and in
    SPARE_PAGES spare pages. Returns (k_pages, v_pages, block_tables): k_pages (n + SPARE_PAGES, page_size, H_kv, d)
    and v_pages likewise with d_v, n = Σ_b ceil(capacity_b / page_size) logical pages; block_tables (B, max_pages)
    int32, a sequence's entries past its own pages pointing at a spare page.

    Its promises (python/tests/test_paged_layout.py checks each over seeds, page sizes and batches):
      - a bijection: the logical pages (numbered over the sequences in turn) and the spare pages fill the pool, each
        on a physical page of its own: no page shared, exactly SPARE_PAGES pages no sequence owns;
      - every page moved: no logical page sits at its own number (one cycle);
      - every row reachable: row r of sequence b is row r % page_size of page block_tables[b, r // page_size], bit for
        bit, for k and v;
      - nothing else finite: every other row of the pool (past each capacity, the spare pages) is NaN, and the table
        entries past a sequence's pages point at a spare page;
      - reproducible: the same caches, page_size and seed give the same pool and tables."""
    _torch()
    import torch
    counts = [-(-k.shape[0] // page_size) for k, _ in caches]
    logical = sum(counts)
    physical = logical + SPARE_PAGES
    g = torch.Generator().manual_seed(seed * 1_000_003 + physical)
    order = _cycle(physical, g)  # logical page i (over all sequences in turn) -> physical page order[i]
    tables = torch.full((len(caches), max(counts)), order[logical], dtype=torch.int32)  # padding: a spare page
    first = 0
    for b, n in enumerate(counts):
        tables[b, :n] = torch.tensor(order[first:first + n], dtype=torch.int32)
        first += n
    device = caches[0][0].device

    def scatter(side: int) -> Tensor:  # -> (physical, page_size, H_kv, dim)
        c0 = caches[0][side]
        pages = torch.full((physical, page_size) + tuple(c0.shape[1:]), float("nan"), dtype=c0.dtype, device=device)
        for b, n in enumerate(counts):
            c = caches[b][side]
            rows = torch.full((n * page_size,) + tuple(c.shape[1:]), float("nan"), dtype=c.dtype, device=device)
            rows[:c.shape[0]] = c
            pages[tables[b, :n].long().to(device)] = rows.view(n, page_size, *c.shape[1:])
        return pages
    return scatter(0), scatter(1), tables.to(device)


def pages_of(k_cache: Tensor, v_cache: Tensor, page_size: int, seed: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    """(k_pages, v_pages, block_table) for one contiguous cache (capacity, H_kv, dim) (pool_of of one sequence, with its
    promises): block_table (ceil(capacity / page_size),) int32, block_table[j] != j for every page j."""
    k_pages, v_pages, tables = pool_of([(k_cache, v_cache)], page_size, seed)
    return k_pages, v_pages, tables[0]


def _nan_from_finite(out: Any, rows: Sequence[Tensor], what: str) -> None:
    """A ValueError naming a read outside the pages when `out` holds NaN although every row it may read is finite."""
    import torch
    if isinstance(out, torch.Tensor) and bool(torch.isnan(out).any()) and all(bool(torch.isfinite(r).all())
                                                                               for r in rows):
        raise ValueError(f"NaN in the output while the rows it may read are finite: it read a page its "
                         f"{what} does not give it, or a row past n_kv (kvconf.paged fills spare pages and the rows "
                         f"past the cache with NaN)")


def _check(fn: object, page_size: int, form: str) -> None:
    if isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= 4096:
        raise ValueError(f"page_size={page_size!r}: expected an int from 1 to 4096")
    if not callable(fn):
        raise TypeError(f"fn={fn!r}: expected a callable {form}")


def paged(fn: PagedFn, page_size: int = 16, seed: int = 0) -> AttentionFn:
    """An attention callable of AttentionKernel's form around fn(q, k_pages, v_pages, block_table, call)."""
    _check(fn, page_size, "fn(q, k_pages, v_pages, block_table, call)")

    def attention(q: Tensor, k_cache: Tensor, v_cache: Tensor, call: _core.AttentionCall) -> Tensor:
        k_pages, v_pages, block_table = pages_of(k_cache, v_cache, page_size, seed)
        out = fn(q, k_pages, v_pages, block_table, call)
        _nan_from_finite(out, [q, k_cache[:call.n_kv], v_cache[:call.n_kv]], "block_table")
        return out
    attention.__name__ = f"paged{page_size}_{getattr(fn, '__name__', 'kernel')}"
    return attention


def paged_batch(fn: PagedBatchFn, page_size: int = 16, seed: int = 0) -> BatchFn:
    """A batch_fn of AttentionKernel's form around fn(q, k_pages, v_pages, block_tables, seq_lens, calls): the
    sequences' caches in one shared pool, their decode rows stacked."""
    _check(fn, page_size, "fn(q, k_pages, v_pages, block_tables, seq_lens, calls)")

    def step(batch: list[BatchItem]) -> list[Tensor]:
        import torch
        k_pages, v_pages, tables = pool_of([(kc, vc) for _, kc, vc, _ in batch], page_size, seed)
        calls = [call for *_, call in batch]
        q = torch.cat([q for q, *_ in batch])                                        # (B, H, d)
        seq_lens = torch.tensor([c.n_kv for c in calls], dtype=torch.int32, device=q.device)
        out = fn(q, k_pages, v_pages, tables, seq_lens, calls)
        _nan_from_finite(out, [q] + [t[:c.n_kv] for (_, kc, vc, c) in batch for t in (kc, vc)], "block_tables row")
        if not isinstance(out, torch.Tensor) or tuple(out.shape[:1]) != (len(batch),):
            raise ValueError(f"expected a tensor (B = {len(batch)}, H, d_v), got "
                             f"{tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}")
        return [out[b:b + 1].clone() for b in range(len(batch))]                      # each (1, H, d_v)
    step.__name__ = f"paged{page_size}_{getattr(fn, '__name__', 'kernel')}"
    return step
