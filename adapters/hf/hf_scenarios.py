# The scenarios of docs/SCENARIOS.md through transformers: prefix, chunked, refill, restore, batch, preempt (and the
# plain reference).
"""Each side of a scenario as transformers runs it, with a DynamicCache passed between forwards:

* prefix  -- another request's prompt (`donor`, sharing the first `shared` tokens) prefilled, its cache cropped to
             `shared` rows (DynamicCache.crop), the rest of this prompt prefilled over it;
* chunked -- the prompt prefilled in chunks of `chunk` tokens, each over the cache filled so far;
* refill  -- after step `at_step` the cache is dropped and everything but the newest token prefilled again (a
             preempted request recomputed), which the next step decodes;
* restore -- after step `at_step` the cache is deep-copied (saved and restored) and generation goes on with the copy;
* batch   -- the prompt in a left-padded batch with other requests (`batch_with`; attention_mask and position_ids
             as generate() builds them), prefilled in one forward, then every sequence decodes one token per forward
             (the others greedy);
* preempt -- at step `at_step` the cache has been dropped: the step's forward runs over the prompt and every token
             chosen so far with a fresh cache, its last row choosing the step's token, and later steps decode over
             the cache it built (vLLM's recompute preemption: no separate decode of the newest token);
* reference -- the plain cache-ON run every scenario is compared with.

Every forward is recorded by engine_report.ForwardProbe from the model's own arguments and cache object: [tokens
fed, rows the cache it was given holds] and the cache's rows after it (in a batch [this sequence's tokens fed, its
rows already cached, every sequence's tokens fed], from the attention mask the model received), never from the
driver's variables; each step's token comes from kvconf's sampler with the shared draw step_draw(seed, t), as in
kvconf_hf_trace.run_path.
"""
from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Sequence

from engine_report import ForwardProbe
from hf_cache import cache_rows, supports_logits_to_keep
from kvconf_sampler import Sampler, sample, step_draw
from scenario_list import NAMES

if TYPE_CHECKING:
    from torch import Tensor

# A side's record: generated_ids, draws, logits (T, V), calls, call_of_step, cache_after, calls_reported_by (and
# k_rows, v_rows with kv).
Run = dict[str, Any]

# The scenarios transformers cannot run as kvconf defines them, and why (kvconf_hf_trace.py exits 2 naming it).
UNSUPPORTED = {
    "kv_dtype": "transformers keeps its cache in the model's dtype; its QuantizedCache (quanto / HQQ) keeps a window "
                "of recent rows unquantised and quantises with its own schemes, not one of the formats kvconf knows "
                "(fp8, q8_0, q4_0, ...)",
}
# Every scenario of engine/scenarios.json but cache (kvconf_hf_trace.run_path's two paths) and UNSUPPORTED: each has a
# driver below.
SCENARIOS = tuple(name for name in NAMES if name != "cache" and name not in UNSUPPORTED)


class Hooks:
    """The scenario drivers' variation points, each the scenario done right. adapters/hf/planted_scenario_faults.py
    replaces HOOKS with realistic bugs, as kvconf's engine takes its planted scenario faults through ScenarioHooks."""

    def prefix_rows(self, shared: int) -> int:
        """prefix: the donor cache's rows the request keeps (the driver then prefills from token `shared` on)."""
        return shared

    def chunks(self, n: int, chunk: int) -> list[tuple[int, int]]:
        """chunked: the [begin, end) token ranges the prompt of n tokens is prefilled in."""
        return [(b, min(n, b + chunk)) for b in range(0, n, chunk)]

    def batch_mask(self, mask: list[list[int]]) -> list[list[int]]:
        """batch: the attention mask the batched forwards get ((B, columns) of 0 for padding, 1 for tokens)."""
        return mask

    def batch_rows(self, rows: int) -> int:
        """batch: how many of the batch's rows (this request first) the batched forwards are given."""
        return rows


HOOKS = Hooks()


class _Steps:
    """What a side records per step: its logits row, the shared draw, the token kvconf's sampler chose from them, and
    the call whose logits those were."""

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler
        self.rows: list[Tensor] = []
        self.draws: list[float] = []
        self.generated: list[int] = []
        self.call_of_step: list[int] = []

    def choose(self, out: Any, t: int, calls: list[list[int]]) -> int:
        row = out.logits[0, -1, :].clone()  # (V), the dtype transformers computed it in
        u = step_draw(self.sampler.seed, t)
        tok = sample(row, self.sampler, u)
        self.rows.append(row)
        self.call_of_step.append(len(calls) - 1)
        self.generated.append(tok)
        self.draws.append(u)
        return tok

    def result(self, probe: ForwardProbe) -> Run:
        import torch
        return {"generated_ids": self.generated, "draws": self.draws, "logits": torch.stack(self.rows).contiguous(),
                "calls": probe.calls, "call_of_step": self.call_of_step, "cache_after": probe.cache_after,
                "calls_reported_by": probe.reported_by}


def run_side(model: Any, prompt_ids: Sequence[int], scenario: str, side: str, sampler: Sampler, steps: int, *,
             chunk: int = 4, at_step: int = 3, shared: int = 0, donor: Sequence[int] = (), kv: bool = False,
             batch_with: Sequence[Sequence[int]] = ()) -> Run:
    """One side ("scenario" or "reference") of `scenario`: {"generated_ids", "draws", "logits" (T, V), "calls",
    "call_of_step"}, and with kv the side's cache at the end ("k_rows", "v_rows"). ValueError for options the
    scenario cannot use."""
    import torch

    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {', '.join(SCENARIOS)} (got {scenario!r})")
    if side not in ("scenario", "reference"):
        raise ValueError(f"side must be scenario or reference (got {side!r})")
    seq = [int(t) for t in prompt_ids]
    n = len(seq)
    if scenario == "chunked" and chunk < 1:
        raise ValueError("chunk must be >= 1")
    if scenario in ("refill", "restore") and not 1 <= at_step < steps - 1:
        raise ValueError(f"at_step must be in [1, {steps - 2}] (got {at_step})")
    if scenario == "preempt" and not 1 <= at_step < steps:
        raise ValueError(f"at_step must be in [1, {steps - 1}] for preempt (got {at_step})")
    if scenario == "prefix" and (not 1 <= shared < n or list(donor[:shared]) != seq[:shared]):
        raise ValueError(f"the donor must share the prompt's first {shared} tokens, 1 <= shared < {n}")
    if scenario == "batch" and (not batch_with or any(len(o) == 0 for o in batch_with)):
        raise ValueError("batch: at least one other non-empty prompt to batch with")
    if scenario == "batch" and side == "scenario":
        return _run_batch(model, seq, [list(map(int, o)) for o in batch_with], sampler, steps, kv)
    extra = {"logits_to_keep": 1} if supports_logits_to_keep(model) else {}
    steps_ = _Steps(sampler)

    def forward(ids: Sequence[int], cache: Any) -> Any:
        return model(input_ids=torch.tensor([list(ids)], dtype=torch.long), past_key_values=cache, use_cache=True,
                     **extra)

    with torch.inference_mode(), ForwardProbe(model) as probe:
        calls = probe.calls
        # The prompt.
        if side == "reference" or scenario in ("refill", "restore", "preempt"):
            out = forward(seq, None)
        elif scenario == "chunked":
            out, cache = None, None
            for b, e in HOOKS.chunks(n, chunk):
                out = forward(seq[b:e], cache)
                cache = out.past_key_values
        else:  # prefix: the donor request's prefill is another request's forward, not one of this run's calls
            with probe.paused():
                donor_out = forward(list(donor), None)
            cache = donor_out.past_key_values
            try:
                cache.crop(HOOKS.prefix_rows(shared) - len(donor))  # transformers 5: a negative count to drop
            except RuntimeError as e:  # a sliding-window layer already past its window keeps no rows to roll back
                raise ValueError(f"prefix: transformers cannot take the first {shared} rows of this model's cache "
                                 f"(DynamicCache.crop: {str(e).splitlines()[0]})") from None
            out = forward(seq[shared:], cache)
        cache = out.past_key_values
        for t in range(steps):
            if t > 0 and side == "scenario" and scenario == "preempt" and t == at_step:
                out = forward(seq, None)  # preempted: everything so far recomputed with a fresh cache, which it keeps
                cache = out.past_key_values
            elif t > 0:
                out = forward([seq[-1]], cache)
                cache = out.past_key_values
            seq.append(steps_.choose(out, t, calls))
            if side == "scenario" and t + 1 == at_step and scenario == "refill":
                cache = forward(seq[:-1], None).past_key_values  # preempted: rebuilt by one prefill
            if side == "scenario" and t + 1 == at_step and scenario == "restore":
                cache = copy.deepcopy(cache)  # saved and restored
    res = steps_.result(probe)
    if kv:
        res["k_rows"], res["v_rows"] = cache_rows(cache)
    return res


def _run_batch(model: Any, seq: list[int], others: list[list[int]], sampler: Sampler, steps: int, kv: bool) -> Run:
    """Side A of batch: seq (index 0) left-padded into one batch with `others`, as generate() pads a batch."""
    import torch

    extra = {"logits_to_keep": 1} if supports_logits_to_keep(model) else {}
    seqs = [seq] + others
    B, L, n = len(seqs), max(len(s) for s in seqs), len(seq)
    pad = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    mask = [[0] * (L - len(s)) + [1] * len(s) for s in seqs]  # (B, L), then one column per step
    ids = [[pad] * (L - len(s)) + s for s in seqs]
    pos = [[0] * (L - len(s)) + list(range(len(s))) for s in seqs]  # generate(): cumsum(mask) - 1, pads clamped
    steps_ = _Steps(sampler)
    given = HOOKS.batch_rows(B)  # the rows the batched forwards are given (all B)
    with torch.inference_mode(), ForwardProbe(model) as probe:
        out = model(input_ids=torch.tensor(ids[:given]), attention_mask=torch.tensor(HOOKS.batch_mask(mask)[:given]),
                    position_ids=torch.tensor(pos[:given]), use_cache=True, **extra)
        cache = out.past_key_values
        for t in range(steps):
            if t > 0:
                for m in mask:
                    m.append(1)
                out = model(input_ids=torch.tensor([[s[-1]] for s in seqs][:given]),
                            attention_mask=torch.tensor(HOOKS.batch_mask(mask)[:given]),
                            position_ids=torch.tensor([[len(s) - 1] for s in seqs][:given]), past_key_values=cache,
                            use_cache=True, **extra)
                cache = out.past_key_values
            tok = steps_.choose(out, t, probe.calls)
            for i in range(1, B):  # the other requests: greedy (their own token again when their row was not given)
                seqs[i].append(int(torch.argmax(out.logits[i, -1, :].float())) if i < given else seqs[i][-1])
            seq.append(tok)
    res = steps_.result(probe)
    if kv:  # this sequence's rows: its padding dropped
        res["k_rows"], res["v_rows"] = cache_rows(cache, index=0, start=L - n)
    return res
