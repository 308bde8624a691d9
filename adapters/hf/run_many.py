# Runs several command lines of one adapter script in one Python process (one import of torch, transformers or vLLM,
# seconds each, for all of them): the tests' driver for adapters/hf and adapters/vllm.
"""run_many.py [--stderr] SCRIPT RUNS.json

SCRIPT: an adapter script with a main(argv) -> int (adapters/hf/kvconf_hf_trace.py, adapters/vllm/kvconf_vllm_trace.py);
RUNS.json: a JSON list of argument lists, each one command line of SCRIPT.

Exit 0 when every run exited 0; else 1, after running them all and naming each that failed. Prints a JSON line per run:
its argument list, exit status and wall time, and with --stderr what it wrote to sys.stderr (the adapter's own lines;
an engine's log keeps its stream), for tests that check several refusals in one process."""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable


def load_main(script: str) -> Callable[[list[str]], Any]:
    """SCRIPT's main, imported as its command line would run it (its folder first on sys.path)."""
    path = Path(script).resolve()
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{script}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module.main  # type: ignore[no-any-return]


def main(argv: list[str]) -> int:
    capture = argv[:1] == ["--stderr"]
    argv = argv[1:] if capture else argv
    if len(argv) != 2:
        print("run_many.py: usage: run_many.py [--stderr] SCRIPT RUNS.json", file=sys.stderr)
        return 2
    script, runs_file = argv
    try:
        runs = json.loads(Path(runs_file).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        print(f"run_many.py: {runs_file}: cannot read a JSON list of argument lists ({e})", file=sys.stderr)
        return 2
    if not isinstance(runs, list) or not all(isinstance(r, list) and all(isinstance(a, str) for a in r) for r in runs):
        print(f"run_many.py: {runs_file}: expected a JSON list of lists of strings", file=sys.stderr)
        return 2
    try:
        run = load_main(script)
    except (OSError, ImportError, AttributeError) as e:
        print(f"run_many.py: {script}: cannot load its main() ({e})", file=sys.stderr)
        return 2
    failed = []
    for r in runs:
        t0 = time.perf_counter()
        err = io.StringIO()
        with contextlib.redirect_stderr(err) if capture else contextlib.nullcontext():
            rc = run(r)
        line = {"run": " ".join(r), "rc": rc, "wall_s": round(time.perf_counter() - t0, 2)}
        print(json.dumps({**line, "stderr": err.getvalue()} if capture else line), flush=True)
        if rc != 0:
            failed.append(" ".join(r))
    for f in failed:
        print(f"run_many.py: failed: {Path(script).name} {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
