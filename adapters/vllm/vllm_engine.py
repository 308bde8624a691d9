# vLLM's offline engine as kvconf drives it: one engine per configuration, requests stepped one scheduler step at a
# time, and vLLM's own report of every step (SchedulerProbe: what its scheduler handed the model runner).
"""Engine, Request, Result and SchedulerProbe (docs/VLLM.md "How the adapter drives vLLM").

The path record of a trace (docs/TRACES.md "The engine's report") comes from vLLM's scheduler, never from this
adapter's loop: for every engine step the probe keeps the SchedulerOutput vLLM built for its model runner
(`num_scheduled_tokens`: the tokens each request feeds; `NewRequestData` / `CachedRequestData.num_computed_tokens`:
the rows its KV cache already held; `total_num_scheduled_tokens`: every request's rows in the step;
`preempted_req_ids`), the request's `num_computed_tokens` after the step was scheduled (the rows its cache holds
once the step ran) checked against the KV blocks vLLM's cache manager gave it, and from `update_from_output` which
step sampled a token. vLLM is imported when the first Engine is built (the environment below is set before).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from typing import Any, Callable, Iterator, Sequence

import numpy as np
from numpy.typing import NDArray

# In-process engine core (the probe wraps its scheduler), no usage report, no hub, one thread (reproducible on a
# shared 2-core machine), a small CPU KV space: set before vLLM is imported.
_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "OMP_NUM_THREADS": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_LOGGING_LEVEL": "ERROR",
    "TOKENIZERS_PARALLELISM": "false",
}
for _k, _v in _ENV.items():
    os.environ.setdefault(_k, _v)

BLOCK_SIZE = 32  # vLLM's CPU attention backend (CPU_ATTN) takes multiples of 32 only
DTYPES = ("float32", "bfloat16", "float16")


class EngineError(Exception):
    """vLLM could not do what was asked (a scenario it cannot express here, a path it did not take)."""


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    """One vLLM engine: the knobs a scenario turns (docs/VLLM.md "Scenarios")."""
    model_dir: str
    dtype: str
    prefix_caching: bool = False
    max_num_batched_tokens: int | None = None  # a chunk size: the per-step token budget (chunked prefill)
    num_blocks: int | None = None              # KV blocks (preemption): vLLM's num_gpu_blocks_override
    kv_cache_dtype: str = "auto"               # "fp8": vLLM's fp8 KV cache
    max_model_len: int = 512
    max_num_seqs: int = 8


@dataclasses.dataclass
class Request:
    """A request to run: its prompt, how many tokens, and the step (engine step index) it joins at."""
    key: str
    prompt_ids: list[int]
    max_tokens: int
    join_at: int = 0
    skip_prefix_cache: bool = False  # SamplingParams(skip_reading_prefix_cache=True): a cold prefill
    logits: bool = True              # ask vLLM for every step's full-vocabulary raw logits
    kv: bool = False                 # keep its K/V rows as vLLM's cache holds them after its last step


@dataclasses.dataclass
class Result:
    """One request's run as vLLM reported it."""
    generated_ids: list[int]
    logits: NDArray[np.float32] | None       # (T, V): vLLM's raw logits of each sampled step
    calls: list[list[int]]                   # per engine step that scheduled it: [fed, cached, rows of the step]
    cache_after: list[int]                   # its num_computed_tokens once the step was scheduled
    call_of_step: list[int]                  # the call that sampled each generated token
    preempted_after_call: list[int]          # calls after which vLLM preempted it (freed its KV blocks)
    num_cached_tokens: int                   # RequestOutput.num_cached_tokens: its prefix-cache hit
    num_preemptions: int                     # vLLM's Request.num_preemptions
    k_rows: Any = None                       # (L, N, kv_heads * head_dim) torch tensors: vLLM's cache of the
    v_rows: Any = None                       # request after its last step (N rows, positions 0 … N − 1), or None


CALLS_REPORTED_BY = ("vLLM {version} scheduler: each engine step's SchedulerOutput (num_scheduled_tokens = fed, "
                     "New/CachedRequestData.num_computed_tokens = cached, total_num_scheduled_tokens = rows of the "
                     "step, preempted_req_ids), the request's num_computed_tokens after scheduling (cache_after, "
                     "within its KV blocks) and update_from_output's sampled tokens (call_of_step), read by a wrapper "
                     "around Scheduler.schedule and Scheduler.update_from_output")


class SchedulerProbe:
    """Wraps one vLLM scheduler's schedule() and update_from_output() and keeps what each step reported."""

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self.steps: list[dict[str, Any]] = []
        self.kv_wanted: dict[str, int] = {}     # request id -> max_tokens: keep its K/V at its last step
        self.kv_reader: Callable[[list[int], int], tuple[Any, Any]] | None = None
        self.kv: dict[str, tuple[Any, Any]] = {}
        self._schedule = scheduler.schedule
        self._update = scheduler.update_from_output
        scheduler.schedule = self._wrapped_schedule
        scheduler.update_from_output = self._wrapped_update

    def _wrapped_schedule(self, *args: Any, **kwargs: Any) -> Any:
        out = self._schedule(*args, **kwargs)
        before: dict[str, int] = {r.req_id: int(r.num_computed_tokens) for r in out.scheduled_new_reqs}
        cached = out.scheduled_cached_reqs
        before.update({rid: int(n) for rid, n in zip(cached.req_ids, cached.num_computed_tokens)})
        after: dict[str, int] = {}
        for rid in out.num_scheduled_tokens:
            req = self.scheduler.requests[rid]
            after[rid] = int(req.num_computed_tokens)
            blocks = self.scheduler.kv_cache_manager.get_block_ids(rid)
            capacity = len(blocks[0]) * BLOCK_SIZE if blocks else 0
            if after[rid] > capacity:
                raise EngineError(f"vLLM's scheduler says request {rid} holds {after[rid]} rows, but its KV cache "
                                  f"manager gave it {capacity} rows of blocks")
        self.steps.append({"scheduled": {k: int(v) for k, v in out.num_scheduled_tokens.items()},
                           "before": before, "after": after, "rows": int(out.total_num_scheduled_tokens),
                           "preempted": set(out.preempted_req_ids or ()), "sampled": {}})
        return out

    def _wrapped_update(self, scheduler_output: Any, model_output: Any) -> Any:
        # The model ran this step; before update_from_output frees a finished request's blocks, read the K/V of each
        # wanted request whose step sampled its last token (its rows: everything it fed, n + T − 1).
        for rid, max_tokens in self.kv_wanted.items():
            req = self.scheduler.requests.get(rid)
            if req is None or rid not in scheduler_output.num_scheduled_tokens or self.kv_reader is None:
                continue
            if req.num_output_tokens + 1 >= max_tokens and req.num_computed_tokens >= req.num_prompt_tokens:
                blocks = list(self.scheduler.kv_cache_manager.get_block_ids(rid)[0])
                self.kv[rid] = self.kv_reader(blocks, int(req.num_computed_tokens))
        outputs = self._update(scheduler_output, model_output)
        step = self.steps[-1] if self.steps else None
        for eco in outputs.values():
            for o in eco.outputs:
                if step is not None and o.new_token_ids:
                    step["sampled"][o.request_id] = list(o.new_token_ids)
        return outputs

    def calls_of(self, rid: str) -> tuple[list[list[int]], list[int], list[int], list[int]]:
        """The request's calls, cache_after, call_of_step and the calls after which it was preempted."""
        calls: list[list[int]] = []
        cache_after: list[int] = []
        call_of_step: list[int] = []
        preempted_after: list[int] = []
        for step in self.steps:
            if rid in step["preempted"] and calls:
                preempted_after.append(len(calls) - 1)
            fed = step["scheduled"].get(rid, 0)
            if fed == 0:
                continue
            if rid not in step["before"]:
                raise EngineError(f"vLLM's scheduler output scheduled request {rid} without its num_computed_tokens")
            calls.append([fed, step["before"][rid], step["rows"]])
            cache_after.append(step["after"][rid])
            call_of_step.extend([len(calls) - 1] * len(step["sampled"].get(rid, ())))
        return calls, cache_after, call_of_step, preempted_after


def cpu_capability() -> str:
    """torch's name for this CPU's vector ISA (AVX2, AVX512, ...): vLLM's CPU kernels, so its bits, follow it."""
    import torch
    return str(torch.backends.cpu.get_cpu_capability())


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), '' where it cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def fp8_cache_supported() -> bool:
    """vLLM's CPU attention takes an fp8 KV cache only with AVX-512 or AMX (cpu_attn.py, _get_attn_isa)."""
    import torch
    return bool(torch.cpu._is_avx512_supported() or torch.cpu._is_amx_tile_supported())


def vllm_version() -> str:
    import vllm
    return str(vllm.__version__)


class Engine:
    """One vLLM LLM (offline engine) for one EngineConfig, its scheduler probed."""

    def __init__(self, cfg: EngineConfig) -> None:
        from vllm import LLM
        self.cfg = cfg
        kwargs: dict[str, Any] = dict(
            model=cfg.model_dir, dtype=cfg.dtype, skip_tokenizer_init=True, enforce_eager=True,
            max_model_len=cfg.max_model_len, block_size=BLOCK_SIZE, max_logprobs=-1, logprobs_mode="raw_logits",
            enable_prefix_caching=cfg.prefix_caching, max_num_seqs=cfg.max_num_seqs, seed=0,
            kv_cache_dtype=cfg.kv_cache_dtype, disable_log_stats=False)
        if cfg.max_num_batched_tokens is not None:
            kwargs.update(max_num_batched_tokens=cfg.max_num_batched_tokens, enable_chunked_prefill=True)
        else:
            kwargs.update(max_num_batched_tokens=max(cfg.max_model_len, 2048))
        if cfg.num_blocks is not None:
            kwargs.update(num_gpu_blocks_override=cfg.num_blocks)
        if cfg.kv_cache_dtype != "auto" and not fp8_cache_supported():
            raise EngineError(f"kv_cache_dtype {cfg.kv_cache_dtype}: vLLM's fp8 KV cache on the CPU needs AVX-512 or "
                              f"AMX, and this CPU has {cpu_capability()} (vllm/v1/attention/backends/cpu_attn.py)")
        try:
            self.llm = LLM(**kwargs)
        except Exception as e:  # vLLM's own refusal of a configuration: one line, not its traceback
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            errors = getattr(e, "errors", None)  # pydantic's ValidationError: the first error's own message
            if callable(errors):
                try:
                    msg = "; ".join(str(x.get("msg", x)) for x in errors()[:2])
                except Exception:  # noqa: BLE001 - keep the first line
                    pass
            raise EngineError(f"vLLM could not build an engine for {cfg.model_dir} ({cfg.dtype}): "
                              f"{type(e).__name__}: {msg}") from None
        self.engine = self.llm.llm_engine
        core = self.engine.engine_core.engine_core  # in-process (VLLM_ENABLE_V1_MULTIPROCESSING=0)
        self.scheduler = core.scheduler
        self.probe = SchedulerProbe(self.scheduler)
        self.probe.kv_reader = self.read_kv
        self.vocab_size = int(self.engine.model_config.get_vocab_size())
        self.version = vllm_version()
        self.planted = False  # a planted fault is installed (planted_vllm_faults.py, the tests)

    def model(self) -> Any:
        """The torch module vLLM runs (in this process): for the planted faults' hooks."""
        return self.llm.apply_model(lambda m: m)[0]

    @functools.cached_property
    def attention_layers(self) -> list[Any]:
        """Each decoder layer's attention (vLLM's Attention module: its kv_cache, sliding_window, isa)."""
        return [layer.self_attn.attn for layer in self.model().model.layers]

    def layer_cache(self, i: int) -> Any:
        """Layer i's KV cache tensor, (num_blocks, kv_heads, block_size, 2 * head_dim) for CPU_ATTN (a list per
        virtual engine in some vLLM versions: the first)."""
        kv = self.attention_layers[i].kv_cache
        return kv[0] if isinstance(kv, list) else kv

    def sliding_window(self) -> int | None:
        """The window of the model's sliding-window attention layers (Gemma-2's every other layer), None if it has
        none: vLLM keeps their KV blocks in a cache group of their own and frees a block once it leaves the window."""
        windows = [int(w) for a in self.attention_layers if (w := getattr(a, "sliding_window", None)) is not None]
        return min(windows) if windows else None

    def ensure_kv_readable(self) -> None:
        """EngineError unless read_kv can read this engine's cache: one KV cache group holding every row to the end,
        in the model's dtype, in the layout read_kv knows."""
        window = self.sliding_window()
        if window is not None:
            raise EngineError(f"--kv: {self.cfg.model_dir} has sliding-window layers (window {window}), whose KV "
                              "blocks vLLM frees once they leave the window: their rows cannot be read at the end (as "
                              "kvconf-llama-trace's --kv); run it without --kv")
        groups = len(self.scheduler.kv_cache_manager.kv_cache_config.kv_cache_groups)
        if groups != 1:  # each group has its own block ids (found on Gemma-2, helper 14): read with one group's only
            raise EngineError(f"--kv: vLLM keeps this model's KV cache in {groups} groups with block ids of their own; "
                              "kvconf reads a single group's cache")
        if self.cfg.kv_cache_dtype != "auto":
            raise EngineError(f"--kv with kv_cache_dtype {self.cfg.kv_cache_dtype}: the layout and scales of vLLM's "
                              "fp8 CPU cache have not been read back against a reference (docs/VLLM.md \"What is not "
                              "here yet\"); run it without --kv")
        isa = {getattr(a, "isa", None) for a in self.attention_layers}
        if isa != {"vec"}:
            raise EngineError(f"--kv: vLLM's CPU attention runs the {sorted(map(str, isa))} kernels here, whose K/V "
                              "layout kvconf does not know (it reads the 'vec' layout)")

    def read_kv(self, block_ids: list[int], rows: int) -> tuple[Any, Any]:
        """The K (after RoPE) and V rows 0 … rows − 1 held in the blocks, as (L, rows, kv_heads * head_dim) in the
        cache's dtype (ensure_kv_readable says which caches these are).

        Layout, for CPU_ATTN's "vec" kernels (x86 without AMX): each layer's cache is (num_blocks, kv_heads,
        block_size, 2 * head_dim) (vllm/v1/attention/backends/cpu_attn.py), each (block, head) holding block_size *
        2 * head_dim values, K first, stored transposed (head_dim, block_size), then V (block_size, head_dim). Found by
        reading back a run whose K/V transformers also wrote (V equal in either reading; K only transposed;
        docs/VLLM.md "K/V rows")."""
        import torch
        self.ensure_kv_readable()
        ks: list[Any] = []
        vs: list[Any] = []
        for i in range(len(self.attention_layers)):
            cache = self.layer_cache(i)
            _, heads, bs, two_hd = cache.shape
            hd = two_hd // 2
            blk = cache[block_ids].reshape(len(block_ids), heads, 2 * bs * hd)
            k = blk[:, :, : bs * hd].reshape(len(block_ids), heads, hd, bs).permute(0, 3, 1, 2)  # (blocks, bs, H, hd)
            v = blk[:, :, bs * hd:].reshape(len(block_ids), heads, bs, hd).permute(0, 2, 1, 3)
            ks.append(k.reshape(len(block_ids) * bs, heads * hd)[:rows].clone())
            vs.append(v.reshape(len(block_ids) * bs, heads * hd)[:rows].clone())
        return torch.stack(ks), torch.stack(vs)

    def run(self, requests: Sequence[Request], before_step: Callable[[int], None] | None = None) -> dict[str, Result]:
        """Runs the requests to completion, each joining at its join_at step; every step's report is kept."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        if self.engine.has_unfinished_requests():
            raise EngineError("the engine still has unfinished requests")
        if any(r.kv for r in requests):
            self.ensure_kv_readable()  # before anything runs
        self.probe.steps.clear()
        self.probe.kv_wanted.clear()
        self.probe.kv.clear()
        internal: dict[str, str] = {}
        outputs: dict[str, Any] = {}
        pending = sorted(requests, key=lambda r: r.join_at)
        step = 0
        while pending or self.engine.has_unfinished_requests():
            while pending and pending[0].join_at <= step:
                r = pending.pop(0)
                params = SamplingParams(temperature=0.0, max_tokens=r.max_tokens, ignore_eos=True, detokenize=False,
                                        logprobs=-1 if r.logits else None,
                                        skip_reading_prefix_cache=True if r.skip_prefix_cache else None)
                internal[r.key] = self.engine.add_request(r.key, TokensPrompt(prompt_token_ids=list(r.prompt_ids)),
                                                          params)
                if r.kv:
                    self.probe.kv_wanted[internal[r.key]] = r.max_tokens
            if before_step is not None:
                before_step(step)
            for out in self.engine.step():
                if out.finished:
                    outputs[out.request_id] = out
            step += 1
            if step > 100000:
                raise EngineError("vLLM did not finish the requests in 100000 steps")
        results: dict[str, Result] = {}
        for r in requests:
            out = outputs.get(r.key)
            if out is None:
                raise EngineError(f"vLLM returned no finished output for request '{r.key}'")
            rid = internal[r.key]
            calls, cache_after, call_of_step, preempted = self.probe.calls_of(rid)
            comp = out.outputs[0]
            ids = [int(t) for t in comp.token_ids]
            if len(call_of_step) != len(ids):
                raise EngineError(f"request '{r.key}': vLLM's scheduler sampled {len(call_of_step)} tokens, its "
                                  f"output holds {len(ids)}")
            logits = self._logits(r.key, comp.logprobs, ids) if r.logits else None
            req_obj = self.scheduler.requests.get(rid)
            n_pre = len(preempted) if req_obj is None else int(req_obj.num_preemptions)
            k, v = self.probe.kv.get(rid, (None, None))
            if r.kv and k is None:
                raise EngineError(f"request '{r.key}': its K/V rows were not read at its last step")
            results[r.key] = Result(ids, logits, calls, cache_after, call_of_step, preempted,
                                    int(out.num_cached_tokens or 0), n_pre, k, v)
        return results

    def _logits(self, key: str, logprobs: Any, ids: list[int]) -> NDArray[np.float32]:
        """(T, V) from vLLM's per-step {token id: Logprob} dictionaries (logprobs_mode raw_logits: the model's logits
        before any processing)."""
        if logprobs is None or len(logprobs) != len(ids):
            raise EngineError(f"request '{key}': vLLM returned logits for {0 if logprobs is None else len(logprobs)} "
                              f"of {len(ids)} steps")
        v = self.vocab_size
        rows = np.empty((len(ids), v), dtype=np.float32)
        for t, d in enumerate(logprobs):
            if len(d) < v:
                raise EngineError(f"request '{key}' step {t}: vLLM returned {len(d)} of {v} logits")
            tok = np.fromiter(d.keys(), dtype=np.int64, count=len(d))
            val = np.fromiter((lp.logprob for lp in d.values()), dtype=np.float64, count=len(d))
            keep = tok < v
            rows[t, tok[keep]] = val[keep].astype(np.float32)
        return rows

    def reset_prefix_cache(self) -> None:
        if not self.llm.reset_prefix_cache():
            raise EngineError("vLLM could not reset its prefix cache")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.engine.engine_core.shutdown()


@contextlib.contextmanager
def engine(cfg: EngineConfig) -> Iterator[Engine]:
    e = Engine(cfg)
    try:
        yield e
    finally:
        e.close()
