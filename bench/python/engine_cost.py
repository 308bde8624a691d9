"""What a trace pair costs in each engine kvconf judges, side by side (docs/VLLM.md "Cost"): vLLM, transformers and
llama.cpp write cache ON + OFF traces of the same fixture and prompts through their adapters, once with 1 prompt and
once with N; the marginal cost of a pair is (t_N − t_1) / (N − 1) and the start-up (imports, loading, engine
construction) t_1 less one pair; the memory is the peak resident set of the N-prompt run (wait4's ru_maxrss).
Each run `--repeat` times, the median kept. Benchmark, not a test: the machine is shared, so say its load beside it.

    .venv/bin/python bench/python/engine_cost.py [--fixture llama2-tiny] [--dtype float32] [--n 8] [--tokens 16]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_grid import adapter_command, run_measured  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixture", default="llama2-tiny")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--engines", default="vllm,transformers,llama.cpp")
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.n < 2:
        print("engine_cost.py: --n must be at least 2 (the marginal cost is a difference)", file=sys.stderr)
        return 2
    print(f"load average before: {os.getloadavg()[0]:.2f}; {args.fixture} {args.dtype}, cache ON + OFF, "
          f"{args.tokens} tokens, 1 and {args.n} prompts, median of {args.repeat}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for engine in args.engines.split(","):
            t: dict[int, list[float]] = {1: [], args.n: []}
            rss: list[float] = []
            for rep in range(args.repeat):
                for n in (1, args.n):
                    out = Path(tmp) / f"{engine}-{n}-{rep}"
                    cmd = adapter_command(engine, args.fixture, args.dtype, "cache", n, args.tokens, out)
                    if cmd is None:
                        raise SystemExit(f"engine_cost.py: {engine} has no {args.dtype} form of {args.fixture}")
                    rc, wall, peak = run_measured(cmd, Path(tmp) / f"{engine}-{n}-{rep}.log")
                    if rc != 0:
                        print((Path(tmp) / f"{engine}-{n}-{rep}.log").read_text()[-2000:], file=sys.stderr)
                        raise SystemExit(f"engine_cost.py: {engine} exited {rc}")
                    t[n].append(wall)
                    if n == args.n:
                        rss.append(peak)
            t1, tn = statistics.median(t[1]), statistics.median(t[args.n])
            pair = (tn - t1) / (args.n - 1)
            rows.append((engine, t1 - pair, pair, statistics.median(rss)))
            print(f"{engine}: 1 prompt {t1:.2f} s, {args.n} prompts {tn:.2f} s, per pair {pair:.3f} s", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("| engine | start-up s | s per trace pair | peak RSS MiB |\n|---|---|---|---|")
    for engine, start, pair, peak in rows:
        print(f"| {engine} | {start:.1f} | {pair:.2f} | {peak:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
