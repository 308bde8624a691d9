"""The three engines kvconf judges, side by side (docs/VLLM.md "Findings", docs/MODELS.md): vLLM, transformers and
llama.cpp write traces of the same fixtures, prompts and scenarios through their adapters; `kvconf check` judges each
folder; a Markdown table per engine, scenario and dtype says how many pairs diverged, whether prefill logits and every
step were bitwise, whether each flip was a near tie, and the check's verdict. Also the cost: wall time and the peak
resident memory of each adapter run (its process tree, from wait4's rusage), per trace pair.

    .venv/bin/python bench/python/engine_grid.py --out OUT [--fixtures llama2-tiny,mistral-tiny,gemma2-tiny]
        [--engines vllm,transformers,llama.cpp] [--dtypes float32,bfloat16,float16] [--n 8] [--tokens 16]
        [--scenarios cache,prefix,batch,chunked,preempt]

Each (engine, fixture, dtype, scenario) run is kept: a folder with a finished `check/pairs.jsonl` is not run again
(an interrupted grid resumes). transformers runs eager attention; llama.cpp has no bf16 GGUF of the fixtures here and
runs f32 / f16 files with an f32 / f16 KV cache. vLLM's traces carry their K/V rows (--kv: cached_kv judges them)
except on models with sliding-window layers, whose rows vLLM frees.
Options differ where the engines do (prefix: vLLM shares whole 32-token blocks, the others half the prompt; chunked:
vLLM's token budget 16, the others chunks of 16).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
DTYPE_SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def adapter_command(engine: str, fixture: str, dtype: str, scenario: str, n: int, tokens: int,
                    out: Path) -> list[str] | None:
    model = BUILD / "fixtures" / "models" / fixture
    prompts = BUILD / "fixtures" / "prompts" / ("smollm2-gsm8k.json" if fixture == "smollm2-135m" else "gsm8k.json")
    common = ["--prompts", str(prompts), "--n", str(n), "--max-new-tokens", str(tokens), "--out", str(out)]
    if engine == "vllm":
        # --kv where vLLM keeps every row: a model with sliding-window layers frees their blocks (docs/VLLM.md)
        sliding = json.loads((model / "config.json").read_text()).get("sliding_window") is not None
        return [str(ROOT / ".venv-vllm" / "bin" / "python"), str(ROOT / "adapters" / "vllm" / "kvconf_vllm_trace.py"),
                "--model", str(model), "--dtype", dtype, "--scenario", scenario, "--chunk", "16",
                *([] if sliding else ["--kv"]), *common]
    if engine == "transformers":
        extra = ["--chunk", "16", "--at-step", "3"] if scenario != "cache" else []
        return [str(ROOT / ".venv" / "bin" / "python"), str(ROOT / "adapters" / "hf" / "kvconf_hf_trace.py"),
                "--model", str(model), "--dtype", dtype, "--attention", "eager", "--scenario", scenario, *extra,
                *common]
    if engine == "llama.cpp":
        if dtype == "bfloat16":
            return None
        gguf = BUILD / "gguf" / f"{fixture}.{'f32' if dtype == 'float32' else 'f16'}.gguf"
        return [str(BUILD / "adapters" / "llama_cpp" / "kvconf-llama-trace"), "--model", str(gguf), "--model-name",
                fixture, "--cache-type", "f32" if dtype == "float32" else "f16", "--scenario", scenario,
                "--chunk", "16", "--at-step", "3", *common]
    raise SystemExit(f"engine_grid.py: --engines: unknown engine '{engine}' (expected vllm, transformers, llama.cpp)")


def run_measured(cmd: list[str], log: Path) -> tuple[int, float, float]:
    """Exit code, wall seconds, and the peak RSS (MiB) of the command's largest process (ru_maxrss of the children)."""
    t0 = time.perf_counter()
    with log.open("w") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
        _, status, usage = os.wait4(p.pid, 0)
    return os.waitstatus_to_exitcode(status), time.perf_counter() - t0, usage.ru_maxrss / 1024.0


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    pairs = len(records)
    flips = [r for r in records if r["free"]["flip"] is not None]
    bitwise = sum(all(d == 0.0 for d in r["free"]["max_abs_logit_diff"]) for r in records)
    prefill = sum(r["free"]["max_abs_logit_diff"][0] == 0.0 for r in records)
    near = 0
    for r in flips:
        rules = {x["rule"]: x for x in r["rules"]}
        near += bool(rules.get("flip_near_tie", {}).get("pass"))
    failed = sum(any(not x["pass"] for x in r["rules"]) for r in records)
    return {"pairs": pairs, "diverged": len(flips), "near": near, "bitwise": bitwise, "prefill": prefill,
            "failed": failed}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--fixtures", default="llama2-tiny,mistral-tiny,gemma2-tiny")
    ap.add_argument("--engines", default="vllm,transformers,llama.cpp")
    ap.add_argument("--dtypes", default="float32,bfloat16,float16")
    ap.add_argument("--scenarios", default="cache,prefix,batch,chunked,preempt")
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=16)
    args = ap.parse_args()
    out = Path(args.out).absolute()
    rows = []
    for engine in args.engines.split(","):
        for fixture in args.fixtures.split(","):
            for dtype in args.dtypes.split(","):
                for scenario in args.scenarios.split(","):
                    folder = out / engine / fixture / dtype / scenario
                    cmd = adapter_command(engine, fixture, dtype, scenario, args.n, args.tokens, folder / "traces")
                    if cmd is None:
                        continue
                    done = folder / "check" / "pairs.jsonl"
                    cost_file = folder / "cost.json"
                    if not done.is_file():
                        folder.mkdir(parents=True, exist_ok=True)
                        rc, wall, rss = run_measured(cmd, folder / "adapter.log")
                        if rc != 0:
                            print(f"{engine} {fixture} {dtype} {scenario}: adapter exit {rc} (see "
                                  f"{folder / 'adapter.log'})", flush=True)
                            continue
                        chk = subprocess.run([str(BUILD / "tools" / "kvconf"), "check", "--dir", str(folder / "traces"),
                                              "--model", str(BUILD / "fixtures" / "models" / fixture), "--out",
                                              str(folder / "check")], capture_output=True, text=True)
                        cost_file.write_text(json.dumps({"adapter_s": wall, "peak_rss_mib": rss,
                                                         "check_rc": chk.returncode}))
                    cost = json.loads(cost_file.read_text())
                    recs = [json.loads(x) for x in done.read_text().splitlines() if x.strip()]
                    s = summarise(recs)
                    rows.append((engine, fixture, dtype, scenario, s, cost))
                    print(f"{engine} {fixture} {DTYPE_SHORT[dtype]} {scenario}: {s} check exit {cost['check_rc']} "
                          f"adapter {cost['adapter_s']:.1f} s {cost['peak_rss_mib']:.0f} MiB", flush=True)
    lines = ["| engine | fixture | dtype | scenario | pairs | diverged | near ties | prefill bitwise | every step "
             "bitwise | kvconf check | adapter s per pair | peak RSS MiB |", "|" + "---|" * 12]
    for engine, fixture, dtype, scenario, s, cost in rows:
        verdict = "pass" if cost["check_rc"] == 0 else f"{s['failed']} failed"
        near = f"{s['near']} of {s['diverged']}" if s["diverged"] else "–"
        lines.append(f"| {engine} | {fixture} | {DTYPE_SHORT[dtype]} | {scenario} | {s['pairs']} | {s['diverged']} | "
                     f"{near} | {s['prefill']} | {s['bitwise']} | {verdict} | "
                     f"{cost['adapter_s'] / max(1, s['pairs']):.1f} | {cost['peak_rss_mib']:.0f} |")
    (out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
