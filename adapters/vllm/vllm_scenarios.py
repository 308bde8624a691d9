# The two sides of each kvconf scenario (engine/scenarios.json, docs/SCENARIOS.md) as vLLM runs them: which engine
# configuration, which requests beside the traced one, and what vLLM must be made to do (docs/VLLM.md "Scenarios").
"""run_scenario(name, engines, prompt, others, steps, option) -> Pair: both sides' Results and their scenario fields.

Every side's path record is vLLM's own (vllm_engine.SchedulerProbe); nothing here writes a call. What this module
chooses is only what a user of vLLM chooses: the engine's flags and which requests run beside the traced one.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from vllm_engine import (
    BLOCK_SIZE,
    Engine,
    EngineConfig,
    EngineError,
    Request,
    Result,
    cpu_capability,
    fp8_cache_supported,
)

# vLLM's scenarios: kvconf's list (engine/scenarios.json) less restore (vLLM's offline API saves no request's cache)
# and refill (vLLM rebuilds a preempted request with the newest token inside the recompute: that is preempt)
VLLM_SCENARIOS = ("cache", "prefix", "batch", "chunked", "preempt")  # --scenario all
# kv_dtype (vLLM's fp8 KV cache against the model's own) only when asked: it needs a CPU with AVX-512 or AMX
KV_FORMATS = {"fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}  # kvconf's kv_format -> vLLM's kv_cache_dtype
NOT_EXPRESSIBLE = {
    "refill": "vLLM recomputes a preempted request with its newest token inside the recompute: use --scenario preempt",
    "restore": "vLLM's offline API cannot save and restore one request's KV cache",
}


@dataclasses.dataclass
class Side:
    result: Result
    path: str                        # cache_on / cache_off
    scenario: dict[str, Any]         # the trace's scenario object
    report: dict[str, Any]           # vLLM's own numbers about the path (the trace's engine_report)


@dataclasses.dataclass
class Pair:
    a: Side
    b: Side


def _report(r: Result, **extra: Any) -> dict[str, Any]:
    return {"num_cached_tokens": r.num_cached_tokens, "num_preemptions": r.num_preemptions,
            "preempted_after_calls": r.preempted_after_call, **extra}


def recompute_side(eng: Engine, prompt: Sequence[int], steps: int, kv: bool = False) -> Result:
    """Cache OFF: every step a new request over the whole sequence so far, one token, no cache reuse (the engine has
    prefix caching off, and each request skips reading it). kv: keep step 0's recompute's K/V rows (kv_step 0)."""
    seq = list(prompt)
    rows: list[Any] = []
    calls: list[list[int]] = []
    cache_after: list[int] = []
    preempted: list[int] = []
    cached_tokens = 0
    ids: list[int] = []
    k0 = v0 = None
    for t in range(steps):
        res = eng.run([Request(f"off{t}", seq, 1, skip_prefix_cache=True, kv=kv and t == 0)])[f"off{t}"]
        if t == 0:
            k0, v0 = res.k_rows, res.v_rows
        if len(res.calls) != 1 or res.call_of_step != [0]:
            raise EngineError(f"cache-OFF step {t}: vLLM ran the one-token request in {len(res.calls)} calls")
        calls.append(res.calls[0])
        cache_after.append(res.cache_after[0])
        cached_tokens = max(cached_tokens, res.num_cached_tokens)
        assert res.logits is not None
        rows.append(res.logits[0])
        ids.append(res.generated_ids[0])
        seq.append(res.generated_ids[0])
    import numpy as np
    return Result(ids, np.stack(rows), calls, cache_after, list(range(steps)), preempted, cached_tokens, 0, k0, v0)


def default_shared(n: int) -> int:
    """The prefix vLLM can take from another request's cache: whole blocks, and never the prompt's last token."""
    return ((n - 1) // BLOCK_SIZE) * BLOCK_SIZE


def check_option(name: str, n: int, steps: int, option: int | None) -> int | None:
    """The scenario's option for a prompt of n tokens, or EngineError saying why vLLM cannot take it."""
    if name in NOT_EXPRESSIBLE:
        raise EngineError(f"scenario '{name}': {NOT_EXPRESSIBLE[name]}")
    if name == "kv_dtype":
        return None
    if name not in VLLM_SCENARIOS:
        raise EngineError(f"scenario '{name}': unknown (expected one of {', '.join(VLLM_SCENARIOS)})")
    if name == "prefix":
        shared = default_shared(n) if option is None else option
        if shared < BLOCK_SIZE or shared % BLOCK_SIZE or shared > n - 1:
            raise EngineError(f"prefix: shared {shared} for a prompt of {n} tokens: vLLM's prefix cache holds whole "
                              f"blocks of {BLOCK_SIZE} tokens and never the last prompt token (expected a multiple of "
                              f"{BLOCK_SIZE} in [{BLOCK_SIZE}, {n - 1}]: prompts of at least {BLOCK_SIZE + 1} tokens)")
        return shared
    if name == "chunked":
        chunk = option if option is not None else 16
        if not 1 <= chunk < n:
            raise EngineError(f"chunked: chunk {chunk} for a prompt of {n} tokens (expected 1 … {n - 1})")
        if chunk < 8:
            raise EngineError(f"chunked: chunk {chunk}: vLLM's token budget per step must be at least max_num_seqs (8)")
        return chunk
    if name == "preempt" and steps < 8:
        raise EngineError(f"preempt: {steps} tokens: vLLM preempts the request at its second or third step and "
                          "recomputes it after the competing request ends (expected --max-new-tokens 8 or more)")
    return None


def run_scenario(name: str, make: Callable[[EngineConfig], Engine], base: EngineConfig, prompt: Sequence[int],
                 other: Sequence[int], steps: int, option: int | None, plant: Any = None, kv: bool = False,
                 kv_format: str | None = None) -> Pair:
    """Both sides of scenario `name` for one prompt; `other`: another prompt's ids (the other requests' tokens);
    plant: a planted_vllm_faults.Plant for this scenario's side A (the tests), or None; kv: each side's K/V rows as
    vLLM's cache holds them (cache OFF: its step-0 recompute's)."""
    n = len(prompt)
    option = check_option(name, n, steps, option)
    if plant is not None and plant.scenario != name:
        raise EngineError(f"--plant: a fault of the {plant.scenario} scenario, not of {name}")

    def install(e: Engine) -> None:  # once per engine (a pooled engine serves every prompt of the run)
        if plant is not None and plant.install and not getattr(e, "planted", False):
            plant.install(e)
            e.planted = True
    p = list(prompt)
    if name == "cache":
        eng = make(base)
        install(eng)
        on = eng.run([Request("on", p, steps, kv=kv)])["on"]
        off = recompute_side(eng, p, steps, kv)
        return Pair(Side(on, "cache_on", {"name": "cache"}, _report(on)),
                    Side(off, "cache_off", {"name": "cache"}, _report(off)))
    if name == "prefix":
        assert option is not None
        eng = make(dataclasses.replace(base, prefix_caching=True))
        install(eng)
        eng.reset_prefix_cache()
        # another request: the shared prefix, then its own tokens (a block of the other prompt's). A model with
        # sliding-window layers keeps only the window's blocks, so its donor ends one token past the prefix (the
        # window's blocks at the prefix's end are then the ones it computed and vLLM cached).
        own = [t for t in other if t != p[option]][:1] or [(p[option] + 1) % 2]
        donor = p[:option] + (own if eng.sliding_window() else list(other)[: BLOCK_SIZE] + [p[0]])
        eng.run([Request("donor", donor, 1, logits=False)])
        a = eng.run([Request("hot", p, steps, kv=kv)])["hot"]
        b = eng.run([Request("cold", p, steps, skip_prefix_cache=True, kv=kv)])["cold"]
        opt = {"shared": option}
        return Pair(Side(a, "cache_on", {"name": "prefix", "side": "scenario", **opt},
                         _report(a, donor_tokens=len(donor))),
                    Side(b, "cache_on", {"name": "prefix", "side": "reference", **opt}, _report(b)))
    if name == "batch":
        eng = make(base)
        install(eng)
        longer = list(other) + p                       # runs beside it the whole time
        shorter = list(other)[: max(1, len(other) // 3)]  # joins at step 2 and leaves before it ends
        reqs = [Request("long", longer, steps + 2, logits=False), Request("seq", p, steps, kv=kv),
                Request("short", shorter, max(1, steps - 4), join_at=2, logits=False)]
        a = eng.run([r for r in reqs if r.key == "seq"] if plant is not None and plant.drop_others else reqs)["seq"]
        b = eng.run([Request("alone", p, steps, kv=kv)])["alone"]
        rep = {"others": [{"prompt_tokens": len(longer), "join_at_step": 0, "max_tokens": steps + 2},
                          {"prompt_tokens": len(shorter), "join_at_step": 2, "max_tokens": max(1, steps - 4)}]}
        return Pair(Side(a, "cache_on", {"name": "batch", "side": "scenario"}, _report(a, **rep)),
                    Side(b, "cache_on", {"name": "batch", "side": "reference"}, _report(b)))
    if name == "kv_dtype":
        if not fp8_cache_supported():
            raise EngineError(f"kv_dtype: vLLM's fp8 KV cache on the CPU needs AVX-512 or AMX, and this CPU has "
                              f"{cpu_capability()} (vllm/v1/attention/backends/cpu_attn.py)")
        fmt = kv_format or "fp8_e4m3"
        eng_a = make(dataclasses.replace(base, kv_cache_dtype=KV_FORMATS[fmt]))
        install(eng_a)
        a = eng_a.run([Request("narrow", p, steps, kv=kv)])["narrow"]
        b = make(base).run([Request("own", p, steps, kv=kv)])["own"]
        opt_k = {"kv_format": fmt}
        return Pair(Side(a, "cache_on", {"name": "kv_dtype", "side": "scenario", **opt_k},
                         _report(a, vllm_kv_cache_dtype=KV_FORMATS[fmt])),
                    Side(b, "cache_on", {"name": "kv_dtype", "side": "reference", **opt_k}, _report(b)))
    if name == "chunked":
        assert option is not None
        eng_a = make(dataclasses.replace(base, max_num_batched_tokens=option))
        install(eng_a)
        a = eng_a.run([Request("chunked", p, steps, kv=kv)])["chunked"]
        eng_b = make(base)
        b = eng_b.run([Request("whole", p, steps, kv=kv)])["whole"]
        opt = {"chunk": option}
        return Pair(Side(a, "cache_on", {"name": "chunked", "side": "scenario", **opt},
                         _report(a, max_num_batched_tokens=option)),
                    Side(b, "cache_on", {"name": "chunked", "side": "reference", **opt}, _report(b)))
    if make(base).sliding_window() is not None:
        raise EngineError("preempt: vLLM keeps this model's sliding-window layers in a KV cache group of their own "
                          "(its hybrid allocator), so a block count does not say when the request is preempted; "
                          "kvconf's preempt set-up models one group only")
    # preempt: a competing request, admitted first, takes the last free KV block at its second decode, so vLLM
    # preempts the traced request (the last admitted) and recomputes it once the competitor has finished
    competitor = (list(other) * (2 * BLOCK_SIZE // max(1, len(other)) + 2))[: 2 * BLOCK_SIZE - 1]
    c_tokens = 4
    blocks = -(-(len(competitor) + 1) // BLOCK_SIZE) + -(-(n + 1) // BLOCK_SIZE)
    need_alone = -(-(n + steps) // BLOCK_SIZE)
    num_blocks = max(blocks, need_alone) + 1  # + vLLM's null block
    reqs = [Request("competitor", competitor, c_tokens, logits=False), Request("seq", p, steps, kv=kv)]
    room = plant is not None and plant.room
    eng_a = make(base if room else dataclasses.replace(base, num_blocks=num_blocks,
                                                        max_model_len=(num_blocks - 1) * BLOCK_SIZE))
    install(eng_a)
    a = eng_a.run(reqs)["seq"]
    eng_b = make(base)
    b = eng_b.run(reqs)["seq"]
    # at_step: the step whose token the recompute chose (vLLM's report: the first call after a preemption)
    at_step = -1
    if a.preempted_after_call:
        first = a.preempted_after_call[0] + 1
        at_step = a.call_of_step.index(first) if first in a.call_of_step else -1
    if room:
        at_step = 2  # the planted path lie: a preemption claimed that vLLM never made
    if not 1 <= at_step <= steps - 1:
        raise EngineError(f"preempt: vLLM did not preempt and recompute the request within {steps} tokens "
                          f"(num_blocks {num_blocks}, preempted after calls {a.preempted_after_call})")
    opt = {"at_step": at_step}
    pre: dict[str, Any] = {"num_blocks": num_blocks,
                           "competitor": {"prompt_tokens": len(competitor), "max_tokens": c_tokens}}
    return Pair(Side(a, "cache_on", {"name": "preempt", "side": "scenario", **opt}, _report(a, **pre)),
                Side(b, "cache_on", {"name": "preempt", "side": "reference", **opt},
                     _report(b, competitor=pre["competitor"])))
