# Planted faults on the vLLM side, installed from outside vLLM's files by wrapping its objects (no vLLM file is
# edited): each is a bug a serving engine could have, and kvconf check must catch it (docs/VLLM.md "Planted faults").
"""get(name) -> Plant: the scenario it plants into and how (installed on side A's engine, or a change of the run).

Faults (the logits or the cache are wrong; kvconf check's logit, bitwise or path rules must catch them):

* prefix_block_short   -- a prefix-cache hit hands the request one block fewer than the cache holds (vLLM then
                          recomputes that block: an honest-looking run whose path is not the scenario's);
* prefix_foreign_block -- a prefix-cache hit reads another request's cached block in place of its own last block;
* batch_neighbour      -- a batched step's logits depend on the other requests in the step (each request's last hidden
                          row moved by 5 % of the step's mean row less its own: nothing when it runs alone);
* preempt_forgets_layer -- after a preempted request is recomputed, its KV blocks of the last layer are zeroed.

Path lies (vLLM computes correctly but not the scenario's path, and the adapter writes the scenario anyway; only
scenario_path, reading vLLM's own report, can tell):
* prefix_cold   -- the prefix-cache lookup finds nothing: the "hot" side is a cold prefill;
* batch_alone   -- the other requests are left out: the "batched" side ran alone;
* preempt_room  -- the engine gets all the KV blocks it wants: the "preempted" side was never preempted (the adapter
                   claims a recompute at step 2).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from vllm_engine import BLOCK_SIZE, Engine, EngineError


@dataclasses.dataclass(frozen=True)
class Plant:
    scenario: str
    install: Callable[[Engine], None] | None = None  # on the engine of side A
    drop_others: bool = False                         # batch: side A without the other requests
    room: bool = False                                # preempt: side A's engine with every block it wants


def _prefix_block_short(eng: Engine) -> None:
    mgr = eng.scheduler.kv_cache_manager
    real = mgr.get_computed_blocks

    def short(request: Any) -> Any:
        blocks, n, boundary = real(request)
        if n >= 2 * BLOCK_SIZE and blocks.blocks and len(blocks.blocks[0]) >= 2:
            kept = tuple(list(g[:-1]) for g in blocks.blocks)
            return mgr.create_kv_cache_blocks(kept), n - BLOCK_SIZE, boundary
        return blocks, n, boundary
    mgr.get_computed_blocks = short


def _prefix_foreign_block(eng: Engine) -> None:
    mgr = eng.scheduler.kv_cache_manager
    real = mgr.get_computed_blocks

    def foreign(request: Any) -> Any:
        blocks, n, boundary = real(request)
        if n == 0 or not blocks.blocks or not blocks.blocks[0]:
            return blocks, n, boundary
        hit = blocks.blocks[0]
        ids = {b.block_id for b in hit}
        others = [b for b in mgr.block_pool.blocks if b.block_hash is not None and b.block_id not in ids
                  and not b.is_null]
        if not others:
            raise EngineError("prefix_foreign_block: no other request's block is in vLLM's prefix cache")
        swapped = (list(hit[:-1]) + [others[0]],) + tuple(list(g) for g in blocks.blocks[1:])
        return mgr.create_kv_cache_blocks(swapped), n, boundary
    mgr.get_computed_blocks = foreign


def _batch_neighbour(eng: Engine) -> None:
    model = eng.model()
    real = model.compute_logits

    def leaky(hidden_states: Any, *args: Any, **kwargs: Any) -> Any:
        # hidden_states: (requests in the step, H), one row per request that samples
        if hidden_states.shape[0] > 1:
            hidden_states = hidden_states + 0.05 * (hidden_states.mean(dim=0, keepdim=True) - hidden_states)
        return real(hidden_states, *args, **kwargs)
    model.compute_logits = leaky


def _preempt_forgets_layer(eng: Engine) -> None:
    sched = eng.scheduler
    real = sched.update_from_output
    kv = eng.layer_cache(-1)  # the last layer's: (num_blocks, kv_heads, block_size, 2 * head_dim), K and V per block

    def forget(scheduler_output: Any, model_output: Any) -> Any:
        for r in scheduler_output.scheduled_cached_reqs.resumed_req_ids | {
                n.req_id for n in scheduler_output.scheduled_new_reqs if n.num_computed_tokens == 0
                and sched.requests[n.req_id].num_preemptions > 0}:
            block_ids = sched.kv_cache_manager.get_block_ids(r)[0]
            kv[list(block_ids)] = 0
        return real(scheduler_output, model_output)
    sched.update_from_output = forget


def _prefix_cold(eng: Engine) -> None:
    mgr = eng.scheduler.kv_cache_manager
    mgr.get_computed_blocks = lambda request: (mgr.empty_kv_cache_blocks, 0, 0)


PLANTS: dict[str, Plant] = {
    "prefix_block_short": Plant("prefix", _prefix_block_short),
    "prefix_foreign_block": Plant("prefix", _prefix_foreign_block),
    "batch_neighbour": Plant("batch", _batch_neighbour),
    "preempt_forgets_layer": Plant("preempt", _preempt_forgets_layer),
    "prefix_cold": Plant("prefix", _prefix_cold),
    "batch_alone": Plant("batch", drop_others=True),
    "preempt_room": Plant("preempt", room=True),
}


def get(name: str) -> Plant:
    if name not in PLANTS:
        raise EngineError(f"--plant {name}: unknown (expected one of {', '.join(PLANTS)})")
    return PLANTS[name]
