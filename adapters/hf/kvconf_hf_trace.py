# Hugging Face transformers adapter: runs a local checkpoint folder cache ON and OFF, or both sides of a scenario
# (prefix, chunked, refill, restore, batch, preempt: hf_scenarios.py), and writes kvconf.trace/1.2 files (each call
# as the model got it).
"""Write kvconf.trace/1 traces (docs/TRACES.md) from a local Hugging Face checkpoint run through transformers.

For each prompt and each path it writes one .safetensors file:

* cache_on  -- one forward over the prompt with use_cache=True, then one forward per step over the single new token
               with the returned past_key_values (the incremental path);
* cache_off -- at every step one forward over the whole sequence (prompt + tokens so far) with use_cache=False (full
               recompute, the seed paper's cache-OFF).

Tokens are chosen with kvconf's own sampler (engine/src/sampling.cpp), ported here in float64 so both paths share the
per-step draw u = step_draw(seed, t) and a different token can only come from different logits.

Library use (no torch import until a model is loaded)::

    import kvconf_hf_trace as hf
    hf.step_draw(0, 0)                                   # SplitMix64 draw of step 0
    hf.sample(logits_row, hf.Sampler("topk", seed=3), u)  # kvconf's sampler
    model = hf.load_model("build/fixtures/models/llama2-tiny", "float16", "sdpa")
    run = hf.run_path(model, prompt_ids, "cache_on", hf.Sampler("greedy"), 16, hidden=False)

The network is never used: HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE are set before transformers is imported and the model
is loaded with local_files_only=True.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NoReturn, Sequence

from engine_report import ForwardProbe
from hf_cache import cache_rows, supports_logits_to_keep
from hf_scenarios import SCENARIOS, UNSUPPORTED, Run, run_side
from kvconf_sampler import Sampler, sample, step_draw

if TYPE_CHECKING:
    from typing import TypeGuard

    from torch import Tensor

__all__ = ["Sampler", "sample", "step_draw", "cache_rows", "supports_logits_to_keep", "load_model", "run_path", "main"]

# 1.1: the scenario and the calls each forward made; 1.2: the calls and the cache's rows after each as the engine
# reported them (engine_report.ForwardProbe), and how (docs/TRACES.md)
FORMAT = "kvconf.trace/1.2"
METADATA_KEY = "kvconf.trace"
DTYPES = ("float32", "float16", "bfloat16")
ATTENTIONS = ("eager", "sdpa")
STRATEGIES = ("greedy", "topk", "topp")
PATHS = {"on": "cache_on", "off": "cache_off"}


class InputError(Exception):
    """Bad input (a file or a field): the CLI prints its message as one stderr line and exits 2."""


# ----------------------------------------------------------------------------------------------------------------------
# Inputs
# ----------------------------------------------------------------------------------------------------------------------

def read_config(model_dir: str) -> dict[str, Any]:
    """The checkpoint's config.json (validated: vocab_size); InputError naming the folder or file otherwise."""
    if not Path(model_dir).is_dir():
        raise InputError(f"{model_dir}: model folder not found")
    cfg_path = Path(model_dir) / "config.json"
    if not cfg_path.is_file():
        raise InputError(f"{cfg_path}: not found (a Hugging Face checkpoint folder needs config.json)")
    try:
        with cfg_path.open(encoding="utf-8") as f:
            cfg = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{cfg_path}: not JSON ({_one_line(e)})") from None
    if not isinstance(cfg, dict):
        raise InputError(f"{cfg_path}: not a JSON object")
    v = _text_config(cfg).get("vocab_size", cfg.get("vocab_size"))
    if not _is_int(v) or v < 1:
        raise InputError(f"{cfg_path}: field 'vocab_size' missing or not a positive integer")
    return cfg


def load_prompts(path: str, vocab_size: int | None = None) -> list[dict[str, Any]]:
    """{"prompts": [{"id": str, "ids": [int, ...], ...}]} -> the list; ids checked against [0, vocab_size)."""
    try:
        with Path(path).open(encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise InputError(f"{path}: prompt file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: not JSON ({_one_line(e)})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("prompts"), list):
        raise InputError(f"{path}: field 'prompts' missing or not a list (expected {{\"prompts\": [...]}})")
    prompts: list[dict[str, Any]] = doc["prompts"]
    if not prompts:
        raise InputError(f"{path}: field 'prompts' is empty")
    seen = set()
    for i, p in enumerate(prompts):
        where = f"{path}: prompts[{i}]"
        if not isinstance(p, dict):
            raise InputError(f"{where}: not an object")
        pid = p.get("id")
        if not isinstance(pid, str) or not pid:
            raise InputError(f"{where}.id: missing or not a non-empty string")
        if "/" in pid or "\\" in pid or pid in (".", "..") or "\0" in pid:
            raise InputError(f"{where}.id: '{pid}' cannot name a file")
        if pid in seen:
            raise InputError(f"{where}.id: duplicate id '{pid}'")
        seen.add(pid)
        ids = p.get("ids")
        if not isinstance(ids, list) or not ids or not all(_is_int(t) for t in ids):
            raise InputError(f"{where}.ids: missing or not a non-empty list of integers")
        if vocab_size is not None:
            bad = [t for t in ids if not 0 <= t < vocab_size]
            if bad:
                raise InputError(f"{where}.ids: token id {bad[0]} outside the vocabulary [0, {vocab_size})")
    return prompts


def _text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The language model's part of a config.json (text_config in a multimodal one, else the whole)."""
    text = cfg.get("text_config")
    return text if isinstance(text, dict) else cfg


def _is_int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _one_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return s[0] if s else type(e).__name__


# ----------------------------------------------------------------------------------------------------------------------
# Model and the two paths
# ----------------------------------------------------------------------------------------------------------------------

def _import_torch() -> tuple[Any, Any]:
    # Never the network: set before transformers / huggingface_hub are imported.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    import torch
    import transformers
    transformers.utils.logging.disable_progress_bar()
    return torch, transformers


def load_model(model_dir: str, dtype: str, attention: str, threads: int = 1) -> Any:
    """AutoModelForCausalLM from the folder, local files only, on CPU, eval mode, deterministic."""
    if dtype not in DTYPES:
        raise InputError(f"dtype '{dtype}' unknown (choices: {', '.join(DTYPES)})")
    if attention not in ATTENTIONS:
        raise InputError(f"attention '{attention}' unknown (choices: {', '.join(ATTENTIONS)})")
    read_config(model_dir)
    torch, transformers = _import_torch()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            model_dir, local_files_only=True, dtype=getattr(torch, dtype), attn_implementation=attention)
    except Exception as e:  # a checkpoint transformers cannot load is bad input
        raise InputError(f"{model_dir}: transformers cannot load it ({type(e).__name__}: {_one_line(e)})") from None
    return model.to("cpu").eval()


def decode_forward(model: Any, seq: list[int], past: Any, **kwargs: Any) -> Any:
    """Cache ON, step t > 0: the newest token over the cache the previous forward returned (the one place the
    incremental path differs from a recompute; planted_path_lies.py replaces it with a recompute)."""
    import torch
    return model(input_ids=torch.tensor([[seq[-1]]], dtype=torch.long), past_key_values=past, use_cache=True,
                 **kwargs)


def run_path(model: Any, prompt_ids: Sequence[int], path: str, sampler: Sampler, max_new_tokens: int,
             hidden: bool = False, kv_step: int | None = None,
             cache_factory: Callable[[Any], Any] | None = None) -> Run:
    """One run of one prompt along `path` ("cache_on" or "cache_off"): max_new_tokens steps, no stop at EOS.

    Returns {"generated_ids", "draws", "logits" (T, V) in the dtype transformers returned, "calls", "cache_after",
    "calls_reported_by" (every forward as the model received it: engine_report.ForwardProbe), and with hidden=True
    "hidden_states" (T, L + 1, H): the last row of every hidden state at each step}. Like HF generate, each forward
    computes the LM head for the last position only (logits_to_keep=1) when the model supports it. With kv_step set,
    also "k_rows" / "v_rows": cache_on's cache at the end; cache_off's recompute of step kv_step, run with a fresh
    cache (use_cache=True from no cache: the same forward, which then returns the K/V it computed). cache_factory:
    builds the cache the cache_on path prefills into (default: the model's own DynamicCache), as an engine configures
    its cache type; the cache_off capture always uses the model's own.
    """
    import torch
    if path not in ("cache_on", "cache_off"):
        raise ValueError(f"path must be cache_on or cache_off (got {path!r})")
    if max_new_tokens < 1:
        raise ValueError("max_new_tokens must be >= 1")
    extra = {"logits_to_keep": 1} if supports_logits_to_keep(model) else {}
    seq = [int(t) for t in prompt_ids]
    generated: list[int] = []
    draws: list[float] = []
    rows: list[Tensor] = []
    hrows: list[Tensor] = []
    past = None
    with torch.inference_mode(), ForwardProbe(model) as probe:
        for t in range(max_new_tokens):
            if path == "cache_off":
                keep = kv_step is not None and t == kv_step
                out = model(input_ids=torch.tensor([seq], dtype=torch.long), use_cache=keep,
                            output_hidden_states=hidden, **extra)
                if keep:
                    kv = cache_rows(out.past_key_values)
            elif t == 0:
                first = {"past_key_values": cache_factory(model)} if cache_factory else {}
                out = model(input_ids=torch.tensor([seq], dtype=torch.long), use_cache=True,
                            output_hidden_states=hidden, **first, **extra)
            else:
                out = decode_forward(model, seq, past, output_hidden_states=hidden, **extra)
            if path == "cache_on":
                past = out.past_key_values
            row = out.logits[0, -1, :].clone()  # (V), the dtype transformers computed it in
            u = step_draw(sampler.seed, t)
            tok = sample(row, sampler, u)
            rows.append(row)
            if hidden:
                hrows.append(torch.stack([h[0, -1, :] for h in out.hidden_states]))  # (L + 1, H)
            generated.append(tok)
            draws.append(u)
            seq.append(tok)
    res: Run = {"generated_ids": generated, "draws": draws, "logits": torch.stack(rows).contiguous(),
                "calls": probe.calls, "cache_after": probe.cache_after, "calls_reported_by": probe.reported_by}
    if hidden:
        res["hidden_states"] = torch.stack(hrows).contiguous()
    if kv_step is not None:
        res["k_rows"], res["v_rows"] = cache_rows(past) if path == "cache_on" else kv
        if path == "cache_off":
            res["kv_step"] = kv_step
    return res


def model_metadata(model: Any, model_dir: str) -> dict[str, Any]:
    cfg = model.config
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    name = Path(model_dir).absolute().name
    return {"name": name, "path": model_dir, "vocab_size": int(text.vocab_size),
            "n_layers": int(text.num_hidden_layers), "hidden_size": int(text.hidden_size)}


def trace_metadata(*, engine_version: str, attention: str, model: dict[str, Any], dtype: str, path: str,
                   sampler: Sampler, prompt_id: str, prompt_ids: Sequence[int], run: Run,
                   scenario: dict[str, Any] | None = None) -> dict[str, Any]:
    """The kvconf.trace/1.2 metadata document (docs/TRACES.md), fields in the spec's order. scenario: {"name", "side",
    options} for a scenario other than cache (docs/SCENARIOS.md)."""
    return {
        "format": FORMAT,
        "engine": {"name": "transformers", "version": engine_version, "attention": attention},
        "model": model,
        "dtype": dtype,
        "path": path,
        "strategy": sampler.metadata(),
        "prompt_id": prompt_id,
        "prompt_ids": [int(t) for t in prompt_ids],
        "generated_ids": [int(t) for t in run["generated_ids"]],
        "draws": [float(u) for u in run["draws"]],
        "scenario": scenario or {"name": "cache"},
        "calls": run["calls"],
        # cache ON and OFF: one forward per generated token; a scenario's run says which forward chose which token
        "call_of_step": run.get("call_of_step", list(range(len(run["calls"])))),
        "cache_after": run["cache_after"],
        "calls_reported_by": run["calls_reported_by"],
        **({"kv_step": run["kv_step"]} if "kv_step" in run else {}),
    }


def trace_filename(prompt_id: str, dtype: str, attention: str, strategy: str, seed: int, on_off: str) -> str:
    return f"{prompt_id}.{dtype}.{attention}.{strategy}.s{seed}.{on_off}.safetensors"


def write_trace(out_path: str | Path, meta: dict[str, Any], tensors: dict[str, Tensor]) -> None:
    """One .safetensors file, atomically: a temporary name in the same folder, fsync, then a rename."""
    from safetensors.torch import save_file
    target = Path(out_path).absolute()
    fd, name = tempfile.mkstemp(dir=target.parent, prefix="." + target.name + ".", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        save_file({k: v.contiguous() for k, v in tensors.items()}, tmp,
                  metadata={METADATA_KEY: json.dumps(meta, allow_nan=False, separators=(",", ":"))})
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        tmp.replace(target)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


# ----------------------------------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one stderr line, exit 2 (argparse would print the usage too)
        raise InputError(f"command line: {message}")


def _positive_int(name: str) -> Callable[[str], int]:
    def conv(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer (got '{s}')") from None
        if v < 1:
            raise argparse.ArgumentTypeError(f"{name} must be >= 1 (got {v})")
        return v
    return conv


def _seed(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seed must be an integer (got '{s}')") from None
    if not 0 <= v < 2 ** 64:
        raise argparse.ArgumentTypeError(f"--seed must be in [0, 2^64) (got {v})")
    return v


def _float_in(name: str, lo: float, hi: float, hi_closed: bool) -> Callable[[str], float]:
    def conv(s: str) -> float:
        try:
            v = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number (got '{s}')") from None
        ok = math.isfinite(v) and v > lo and (v <= hi if hi_closed else v < hi)
        if not ok:
            rng = f"({lo:g}, {hi:g}]" if hi_closed else f"({lo:g}, inf)"
            raise argparse.ArgumentTypeError(f"{name} must be in {rng} (got '{s}')")
        return v
    return conv


def _paths(s: str) -> list[str]:
    items = [x.strip() for x in s.split(",") if x.strip()]
    if not items or any(x not in PATHS for x in items) or len(set(items)) != len(items):
        raise argparse.ArgumentTypeError(f"--paths must be a comma list of distinct on, off (got '{s}')")
    return items


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kvconf_hf_trace.py",
                description="Run a local Hugging Face checkpoint cache ON and cache OFF through transformers and write "
                            "kvconf.trace/1 files (docs/TRACES.md). Never uses the network.")
    p.add_argument("--model", help="checkpoint folder (config.json + weights)")
    p.add_argument("--prompts", help='prompt set: {"prompts": [{"id", "text", "ids"}]} (ids include BOS)')
    p.add_argument("--n", type=_positive_int("--n"), default=2, help="the first N prompts (default 2)")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--attention", choices=ATTENTIONS, default="eager")
    p.add_argument("--strategy", choices=STRATEGIES, default="greedy")
    p.add_argument("--top-k", type=_positive_int("--top-k"), default=50)
    p.add_argument("--top-p", type=_float_in("--top-p", 0.0, 1.0, True), default=0.9)
    p.add_argument("--temperature", type=_float_in("--temperature", 0.0, math.inf, False), default=1.0)
    p.add_argument("--seed", type=_seed, default=0, help="seed of the draws step_draw(seed, t) (default 0)")
    p.add_argument("--max-new-tokens", type=_positive_int("--max-new-tokens"), default=16)
    p.add_argument("--hidden", action="store_true", help="also store hidden_states (T, L+1, H)")
    p.add_argument("--paths", type=_paths, default=["on", "off"], help="on,off (default both; the cache scenario)")
    p.add_argument("--scenario", choices=("cache",) + SCENARIOS + tuple(UNSUPPORTED), default="cache",
                   help="cache (cache ON and OFF, --paths) or one of docs/SCENARIOS.md's: both sides, written as "
                        "<...>.<scenario>.scenario and <...>.<scenario>.reference traces (kvconf.trace/1.2)")
    p.add_argument("--chunk", type=_positive_int("--chunk"), default=4, help="chunked: tokens per chunk (default 4)")
    p.add_argument("--at-step", type=_positive_int("--at-step"), default=3,
                   help="refill, restore: the event follows this step's token; preempt: this step's forward is the "
                        "recompute over a fresh cache (default 3)")
    p.add_argument("--kv", action="store_true",
                   help="also store k_rows / v_rows: a cache-ON side's cache at the end, the cache-OFF side's "
                        "recompute of step --kv-step (the cached_kv rule, docs/SCENARIOS.md)")
    p.add_argument("--kv-step", type=int, default=0, help="with --kv: the cache-OFF step whose K/V are stored "
                                                          "(default 0: the prompt's recompute)")
    p.add_argument("--threads", type=_positive_int("--threads"), default=1, help="torch CPU threads (default 1)")
    p.add_argument("--out", help="output folder (created if missing)")
    p.add_argument("--self-test", action="store_true",
                   help="run the sampler's tests (test_kvconf_sampler.py, with pytest), then exit")
    return p


def write_scenario(args: argparse.Namespace, model: Any, mmeta: dict[str, Any], prompts: list[dict[str, Any]],
                   sampler: Sampler, vocab: int, version: str) -> int:
    """Both sides of args.scenario for the first args.n prompts (prefix: the prompt's first half shared with a donor
    made of that half and the next prompt's tokens, as kvconf's engine does)."""
    if args.scenario in ("refill", "restore") and not 1 <= args.at_step < args.max_new_tokens - 1:
        raise InputError(f"command line: --at-step must be in [1, {args.max_new_tokens - 2}] for {args.scenario}")
    if args.scenario == "preempt" and not 1 <= args.at_step < args.max_new_tokens:
        raise InputError(f"command line: --at-step must be in [1, {args.max_new_tokens - 1}] for preempt")
    if args.scenario == "prefix" and len(prompts) < 2:
        raise InputError(f"{args.prompts}: the prefix scenario needs a second prompt for the donor request")
    for i, p in enumerate(prompts[:args.n]):
        ids = [int(t) for t in p["ids"]]
        shared = max(1, len(ids) // 2)
        other = prompts[(i + 1) % len(prompts)]["ids"]
        donor = ids[:shared] + [int(t) for t in other[1:]]
        opts = {"prefix": {"shared": shared}, "chunked": {"chunk": args.chunk}, "batch": {},
                "refill": {"at_step": args.at_step}, "restore": {"at_step": args.at_step},
                "preempt": {"at_step": args.at_step}}[args.scenario]
        # batch, as kvconf's engine: a longer request (the next prompt, then this one) and a shorter one (the next
        # prompt's first third of min(len(next), len(this)), at least one token).
        batch_with = [[int(t) for t in other] + ids, [int(t) for t in other[:max(1, min(len(other), len(ids)) // 3)]]]
        for side in ("scenario", "reference"):
            try:
                run = run_side(model, ids, args.scenario, side, sampler, args.max_new_tokens, chunk=args.chunk,
                               at_step=args.at_step, shared=shared, donor=donor, kv=args.kv,
                               batch_with=batch_with)
            except ValueError as e:  # a scenario this model or transformers cannot express: say so, exit 2
                raise InputError(f"{args.model}: {e}") from None
            meta = trace_metadata(engine_version=version, attention=args.attention, model=mmeta, dtype=args.dtype,
                                  path="cache_on", sampler=sampler, prompt_id=p["id"], prompt_ids=ids, run=run,
                                  scenario={"name": args.scenario, "side": side, **opts})
            out_path = Path(args.out) / trace_filename(p["id"], args.dtype, args.attention, args.strategy, args.seed,
                                                       f"{args.scenario}.{side}")
            write_trace(out_path, meta, {k: run[k] for k in ("logits", "k_rows", "v_rows") if k in run})
            print(f"{out_path}: {args.scenario} {side} T={len(run['generated_ids'])} calls {run['calls'][:2]}... "
                  f"tokens {run['generated_ids']}", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.self_test:
            return _self_test()
        if args.scenario in UNSUPPORTED:  # before anything loads
            raise InputError(f"command line: --scenario {args.scenario} is not supported: {UNSUPPORTED[args.scenario]}")
        for flag in ("model", "prompts", "out"):
            if getattr(args, flag) is None:
                raise InputError(f"command line: --{flag} is required")
        cfg = read_config(args.model)
        vocab = int(_text_config(cfg).get("vocab_size") or cfg["vocab_size"])  # read_config checked it
        prompts = load_prompts(args.prompts, vocab)
        if args.n > len(prompts):
            raise InputError(f"{args.prompts}: --n {args.n} but the file has {len(prompts)} prompts")
        if Path(args.out).exists() and not Path(args.out).is_dir():
            raise InputError(f"{args.out}: --out exists and is not a folder")
        try:
            Path(args.out).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"{args.out}: cannot create the output folder ({e.strerror})") from None
        sampler = Sampler(args.strategy, args.top_k, args.top_p, args.temperature, args.seed)
        if args.kv and not 0 <= args.kv_step < args.max_new_tokens:
            raise InputError(f"command line: --kv-step must be in [0, {args.max_new_tokens - 1}] "
                             f"(got {args.kv_step})")

        model = load_model(args.model, args.dtype, args.attention, args.threads)
        import transformers
        mmeta = model_metadata(model, args.model)
        if mmeta["vocab_size"] != vocab:
            raise InputError(f"{args.model}: vocab_size {vocab} in config.json but {mmeta['vocab_size']} loaded")
        if args.scenario != "cache":
            return write_scenario(args, model, mmeta, prompts, sampler, vocab, transformers.__version__)
        for p in prompts[:args.n]:
            for on_off in args.paths:
                path = PATHS[on_off]
                try:
                    run = run_path(model, p["ids"], path, sampler, args.max_new_tokens, hidden=args.hidden,
                                   kv_step=args.kv_step if args.kv else None)
                except ValueError as e:  # K/V rows this model's cache cannot give: say so, exit 2
                    raise InputError(f"{args.model}: {e}") from None
                if run["logits"].shape[1] != vocab:
                    raise InputError(f"{args.model}: the model returned {run['logits'].shape[1]} logits per row, "
                                     f"config.json says vocab_size {vocab}")
                meta = trace_metadata(engine_version=transformers.__version__, attention=args.attention,
                                      model=mmeta, dtype=args.dtype, path=path, sampler=sampler,
                                      prompt_id=p["id"], prompt_ids=p["ids"], run=run)
                tensors: dict[str, Tensor] = {"logits": run["logits"]}
                if args.hidden:
                    tensors["hidden_states"] = run["hidden_states"]
                if args.kv:
                    tensors["k_rows"], tensors["v_rows"] = run["k_rows"], run["v_rows"]
                out_path = Path(args.out) / trace_filename(p["id"], args.dtype, args.attention, args.strategy,
                                                           args.seed, on_off)
                write_trace(out_path, meta, tensors)
                print(f"{out_path}: {path} T={len(run['generated_ids'])} logits {str(run['logits'].dtype)[6:]} "
                      f"tokens {run['generated_ids']}", flush=True)
        return 0
    except InputError as e:
        print(f"kvconf_hf_trace: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kvconf_hf_trace: interrupted", file=sys.stderr)
        return 130


def _self_test() -> int:
    """--self-test: pytest on test_kvconf_sampler.py (step_draw is SplitMix64, the sampler picks kvconf's tokens)."""
    import pytest
    tests = Path(__file__).resolve().parent / "test_kvconf_sampler.py"
    rc = pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:kvconf", str(tests)])
    if rc != 0:
        return 1
    print("self-test passed: step_draw is SplitMix64, sampler matches kvconf's cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
