# Runs several kvconf_vllm_trace.py command lines in one process (one import of vLLM, seconds each): the tests' driver.
"""run_many.py RUNS.json   (RUNS.json: a JSON list of argument lists, each one kvconf_vllm_trace.py command line)

Exit 0 when every run exited 0; else 1, after running them all and naming each that failed. Prints each run's
argument list and wall time."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kvconf_vllm_trace  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("run_many.py: usage: run_many.py RUNS.json", file=sys.stderr)
        return 2
    try:
        runs = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        print(f"run_many.py: {argv[0]}: cannot read a JSON list of argument lists ({e})", file=sys.stderr)
        return 2
    if not isinstance(runs, list) or not all(isinstance(r, list) and all(isinstance(a, str) for a in r) for r in runs):
        print(f"run_many.py: {argv[0]}: expected a JSON list of lists of strings", file=sys.stderr)
        return 2
    failed = []
    for r in runs:
        t0 = time.perf_counter()
        rc = kvconf_vllm_trace.main(r)
        print(json.dumps({"run": " ".join(r), "rc": rc, "wall_s": round(time.perf_counter() - t0, 2)}), flush=True)
        if rc != 0:
            failed.append(" ".join(r))
    for f in failed:
        print(f"run_many.py: failed: kvconf_vllm_trace.py {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
