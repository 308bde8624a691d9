"""kvconf.paged's layouts keep the promises paged.py states, checked over seeds, page sizes, capacities and batches:
the physical order a bijection and one cycle, every page moved, no page shared, every row reachable through the
block table bit for bit, everything else NaN, the padding entries on a spare page, the same layout for the same seed."""

from __future__ import annotations

import pytest
import torch

from kvconf.paged import SPARE_PAGES, _cycle, pages_of, pool_of  # kvconf.paged is also the function

H_KV, D, D_V = 2, 3, 4


def caches(capacities: list[int], seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """[(k_cache (capacity, H_KV, D), v_cache (capacity, H_KV, D_V))], finite."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(c, H_KV, D, generator=g), torch.randn(c, H_KV, D_V, generator=g)) for c in capacities]


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equal, NaN where NaN."""
    return a.shape == b.shape and torch.equal(torch.isnan(a), torch.isnan(b)) and \
        torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))


CAPACITIES = [[1], [5], [16], [17], [130], [64, 3], [1, 1, 1, 1], [200, 7, 33, 16]]


@pytest.mark.parametrize("seed", [0, 1, 7])
@pytest.mark.parametrize("page_size", [1, 4, 16])
@pytest.mark.parametrize("capacities", CAPACITIES, ids=lambda c: "caps" + "_".join(map(str, c)))
def test_a_pool_keeps_its_promises(capacities: list[int], page_size: int, seed: int):
    cs = caches(capacities, seed)
    k_pages, v_pages, tables = pool_of(cs, page_size, seed)
    counts = [-(-c // page_size) for c in capacities]
    logical = sum(counts)
    physical = logical + SPARE_PAGES
    assert tuple(k_pages.shape) == (physical, page_size, H_KV, D)
    assert tuple(v_pages.shape) == (physical, page_size, H_KV, D_V)
    assert tables.dtype == torch.int32 and tuple(tables.shape) == (len(capacities), max(counts))
    own = [int(tables[b, j]) for b, n in enumerate(counts) for j in range(n)]  # logical page i (pool order) -> page
    assert all(0 <= p < physical for p in own)
    assert len(set(own)) == logical, own                                       # no page shared
    assert [i for i, p in enumerate(own) if p == i] == [], own                 # every page moved
    spare = set(range(physical)) - set(own)
    assert len(spare) == SPARE_PAGES                                     # a bijection onto the pool
    for b, n in enumerate(counts):
        assert {int(t) for t in tables[b, n:]} <= spare                        # padding: a spare page
    reached = torch.zeros(physical, page_size, dtype=torch.bool)
    for b, (k, v) in enumerate(cs):                                            # every row reachable
        for r in range(k.shape[0]):
            page, row = int(tables[b, r // page_size]), r % page_size
            assert torch.equal(k_pages[page, row], k[r]) and torch.equal(v_pages[page, row], v[r]), (b, r)
            reached[page, row] = True
    assert bool(torch.isnan(k_pages[~reached]).all()) and bool(torch.isnan(v_pages[~reached]).all())  # the rest NaN
    again = pool_of(cs, page_size, seed)                                 # reproducible
    assert all(same(x, y) for x, y in zip((k_pages, v_pages, tables), again))


@pytest.mark.parametrize("capacity", [1, 2, 15, 16, 17, 100])
def test_one_cache_has_no_page_at_its_own_index(capacity: int):
    for seed in range(5):
        (k, v), = caches([capacity], seed)
        k_pages, _, table = pages_of(k, v, 4, seed)
        assert tuple(table.shape) == (-(-capacity // 4),)
        assert all(int(table[j]) != j for j in range(table.shape[0])), table
        assert torch.equal(k_pages[table.long()].reshape(-1, H_KV, D)[:capacity], k)


@pytest.mark.parametrize("n", [2, 3, 5, 16, 61])
def test_the_order_is_one_cycle(n: int):
    for seed in range(10):
        order = _cycle(n, torch.Generator().manual_seed(seed))
        assert sorted(order) == list(range(n))                                 # a bijection
        seen, i = set(), 0
        while i not in seen:
            seen.add(i)
            i = order[i]
        assert len(seen) == n, order                                           # one cycle: no fixed point
