# Benchmark: seconds per cache-ON/cache-OFF run pair through HF transformers (this adapter: both paths, greedy),
# through kvconf's engine (`kvconf model`, the paper's protocol: the pair free-running plus its fp32 reference for
# FlipsAreNearTies, teacher-forced only after a flip) and, with --llama-trace, through llama.cpp (kvconf-llama-trace:
# both paths, greedy, the model load included) on the same fixture, prompts, token count and CPU, and the ratios.
# Usage: bench_vs_kvconf.py --kvconf build/tools/kvconf --fixtures build/fixtures [--model llama2-tiny] [--n 4]
#        [--max-new-tokens 16] [--dtype float16] [--profile fp16-eager] [--threads 1]
#        [--llama-trace build/adapters/llama_cpp/kvconf-llama-trace --gguf build/gguf/llama2-tiny.f16.gguf
#         --cache-type f16]
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kvconf_hf_trace as hf  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kvconf", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--model", default="llama2-tiny")
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--attention", default="eager")
    ap.add_argument("--profile", default="fp16-eager")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--llama-trace", help="kvconf-llama-trace (adapters/llama_cpp), to time llama.cpp too")
    ap.add_argument("--gguf", help="the fixture as GGUF for --llama-trace (build/gguf/<model>.<f32|f16>.gguf)")
    ap.add_argument("--cache-type", default="f16", help="llama.cpp's KV cache type (default f16)")
    a = ap.parse_args()
    if a.llama_trace and not a.gguf:
        print("bench_vs_kvconf: --llama-trace needs --gguf", file=sys.stderr)
        return 2
    model_dir = str(Path(a.fixtures) / "models" / a.model)
    prompts = hf.load_prompts(str(Path(a.fixtures) / "prompts" / "gsm8k.json"))

    with tempfile.TemporaryDirectory() as out:
        cmd = [a.kvconf, "model", "--model", f"fixture:{a.model}", "--profile", a.profile, "--strategies", "greedy",
               "--seeds", "0", "--n", str(a.n), "--max-new-tokens", str(a.max_new_tokens), "--no-layer-drift",
               "--out", out]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if r.returncode not in (0, 1):
            print(f"bench_vs_kvconf: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}", file=sys.stderr)
            return 2
        m = re.search(r"greedy\s+\d+\s+\S+\s+\S+\s+\S+\s+\d+\s+\S+\s+\S+\s+\d+\s+([0-9.]+)", r.stdout)
        kv_s = float(m.group(1)) if m else wall / a.n
        with (Path(out) / "pairs.jsonl").open() as fh:
            ids = [json.loads(line)["prompt_id"] for line in fh if line.strip()]
    # kvconf model names a prompt-set prompt "ids:<index in the file>"; both time the same prompts.
    chosen = [prompts[int(i.split(":", 1)[1])] for i in ids]

    model = hf.load_model(model_dir, a.dtype, a.attention, a.threads)
    sampler = hf.Sampler(strategy="greedy", seed=0)
    hf.run_path(model, chosen[0]["ids"][:8], "cache_on", sampler, 2)  # warm-up, untimed
    t0 = time.perf_counter()
    for p in chosen:
        for path in ("cache_on", "cache_off"):
            hf.run_path(model, p["ids"], path, sampler, a.max_new_tokens)
    hf_s = (time.perf_counter() - t0) / len(chosen)

    llama_s = None
    if a.llama_trace:
        with tempfile.TemporaryDirectory() as out:
            pfile = str(Path(out) / "prompts.json")
            with open(pfile, "w") as fh:
                json.dump({"prompts": [{"id": f"p{i}", "ids": p["ids"]} for i, p in enumerate(chosen)]}, fh)
            cmd = [a.llama_trace, "--model", a.gguf, "--prompts", pfile, "--n", str(len(chosen)), "--max-new-tokens",
                   str(a.max_new_tokens), "--cache-type", a.cache_type, "--threads", str(a.threads),
                   "--out", str(Path(out) / "traces")]
            t0 = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True)
            llama_s = (time.perf_counter() - t0) / len(chosen)
            if r.returncode != 0:
                print(f"bench_vs_kvconf: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}", file=sys.stderr)
                return 2

    print(f"{a.model}, the same {len(chosen)} prompts x {a.max_new_tokens} tokens, greedy, 1 thread:")
    print(f"  transformers {a.dtype} {a.attention} (adapters/hf): {hf_s:.3f} s per pair (ON + OFF)")
    print(f"  kvconf model --profile {a.profile}: {kv_s:.3f} s per pair (ON + OFF + fp32 reference; whole command "
          f"{wall:.1f} s)")
    print(f"  ratio kvconf / transformers = {kv_s / hf_s:.2f}")
    if llama_s is not None:
        print(f"  llama.cpp {Path(a.gguf).name}, cache {a.cache_type} (kvconf-llama-trace): {llama_s:.3f} s per "
              f"pair (ON + OFF, model load included); ratio transformers / llama.cpp = {hf_s / llama_s:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
