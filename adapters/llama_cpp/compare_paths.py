#!/usr/bin/env python3
"""Two kvconf-llama-trace folders of the same prompts (for example flash attention on and off, both with an f16
cache) compared call by call: max |z_a - z_b| per step while both runs still share their context (the same tokens so
far), grouped by side (cache ON or OFF), call kind (the prompt's prefill or a later step) and whether the call
evaluated 64 or more rows (GGML_FA_TILE_Q: from 64 query rows ggml's CPU flash attention takes its tiled kernel,
which accumulates P·V in fp32; with fewer rows, and in decode, it accumulates in fp16 over an f16 cache).

Usage: compare_paths.py A_DIR B_DIR   (traces paired by prompt id and side; docs/LLAMA_CPP.md)
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

USAGE = "Usage: compare_paths.py A_DIR B_DIR"


def read(path: Path) -> tuple[dict[str, Any], NDArray[np.floating[Any]]]:
    """A trace's metadata and its logits (T, V)."""
    from safetensors import safe_open
    with safe_open(str(path), "np") as f:
        return json.loads(f.metadata()["kvconf.trace"]), np.asarray(f.get_tensor("logits"))


def key_of(path: Path) -> tuple[str, str]:
    name = path.name
    return name.split(".", 1)[0], "on" if name.endswith(".on.safetensors") else "off"


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not all(Path(d).is_dir() for d in argv):
        print(f"compare_paths: {USAGE}", file=sys.stderr)
        return 2
    b_files = {key_of(f): f for f in Path(argv[1]).glob("*.safetensors")}
    groups: dict[tuple[str, str, str], list[float]] = {}
    for fa in sorted(Path(argv[0]).glob("*.safetensors")):
        fb = b_files.get(key_of(fa))
        if fb is None:
            continue
        (ma, za), (mb, zb) = read(fa), read(fb)
        n, side = len(ma["prompt_ids"]), key_of(fa)[1]
        for t in range(min(len(za), len(zb))):
            if ma["generated_ids"][:t] != mb["generated_ids"][:t]:
                break  # the contexts differ from here on
            rows = 1 if side == "on" and t > 0 else n + t
            g = (side, "prefill" if t == 0 else "step", ">=64 rows" if rows >= 64 else "<64 rows")
            groups.setdefault(g, []).append(float(abs(za[t] - zb[t]).max()))
    if not groups:
        print("compare_paths: no traces of the same prompt and side in both folders", file=sys.stderr)
        return 2
    print("| side | call | rows in the call | calls | median max\\|Δz\\| | largest |")
    print("|---|---|---|---:|---:|---:|")
    for g in sorted(groups):
        v = groups[g]
        print(f"| {g[0]} | {g[1]} | {g[2]} | {len(v)} | {statistics.median(v):.3g} | {max(v):.3g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
