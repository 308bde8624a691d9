# Runs several kvconf_vllm_trace.py command lines in one process (one import of vLLM, seconds each): the tests' driver.
"""run_many.py [--stderr] RUNS.json   (RUNS.json: a JSON list of argument lists, each a kvconf_vllm_trace.py command
line)

Exit 0 when every run exited 0; else 1, after running them all and naming each that failed. Prints a JSON line per run:
its argument list, exit status and wall time, and with --stderr what it wrote to sys.stderr (the adapter's own lines;
vLLM's log keeps its stream), for tests that check several refusals in one process."""
from __future__ import annotations

import contextlib
import io
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kvconf_vllm_trace  # noqa: E402


def main(argv: list[str]) -> int:
    capture = argv[:1] == ["--stderr"]
    argv = argv[1:] if capture else argv
    if len(argv) != 1:
        print("run_many.py: usage: run_many.py [--stderr] RUNS.json", file=sys.stderr)
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
        err = io.StringIO()
        with contextlib.redirect_stderr(err) if capture else contextlib.nullcontext():
            rc = kvconf_vllm_trace.main(r)
        line = {"run": " ".join(r), "rc": rc, "wall_s": round(time.perf_counter() - t0, 2)}
        print(json.dumps({**line, "stderr": err.getvalue()} if capture else line), flush=True)
        if rc != 0:
            failed.append(" ".join(r))
    for f in failed:
        print(f"run_many.py: failed: kvconf_vllm_trace.py {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
