#!/usr/bin/env python3
"""A kvconf fixture (config.json + model.safetensors) as a GGUF file, by the converter llama.cpp itself ships
(convert_hf_to_gguf.py from the same llama-cpp-python sdist, scripts/llama_cpp.sh), with the LLaMA-2 tokenizer the
fixtures' prompt sets were tokenised with. Written atomically (a temporary name, then a rename).

Usage: to_gguf.py --converter CONVERT_PY --model DIR --tokenizer TOKENIZER.model --outtype f32|f16 --out FILE.gguf
Exit 2 with one line on bad input; the converter's own output is shown only when it fails.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile


def fail(msg: str) -> int:
    print(f"to_gguf: {msg}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--converter", required=True)
    p.add_argument("--model", required=True, help="folder with config.json and model.safetensors")
    p.add_argument("--tokenizer", required=True, help="sentencepiece tokenizer.model")
    p.add_argument("--outtype", required=True, choices=["f32", "f16"])
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    for f, what in ((a.converter, "--converter"), (a.tokenizer, "--tokenizer"),
                    (os.path.join(a.model, "config.json"), "--model's config.json"),
                    (os.path.join(a.model, "model.safetensors"), "--model's model.safetensors")):
        if not os.path.isfile(f):
            return fail(f"{f}: {what} not found")
    try:
        with open(os.path.join(a.model, "config.json"), encoding="utf-8") as f:
            json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        return fail(f"{os.path.join(a.model, 'config.json')}: not JSON ({e})")
    out = os.path.abspath(a.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kvconf-gguf-") as tmp:
        # The converter reads the tokenizer beside the checkpoint: a folder of links.
        src = os.path.join(tmp, os.path.basename(os.path.normpath(a.model)))
        os.mkdir(src)
        for name in ("config.json", "model.safetensors"):
            os.symlink(os.path.abspath(os.path.join(a.model, name)), os.path.join(src, name))
        os.symlink(os.path.abspath(a.tokenizer), os.path.join(src, "tokenizer.model"))
        part = os.path.join(os.path.dirname(out), "." + os.path.basename(out) + ".part")
        r = subprocess.run([sys.executable, a.converter, src, "--outtype", a.outtype, "--outfile", part],
                           capture_output=True, text=True)
        if r.returncode != 0 or not os.path.isfile(part):
            sys.stderr.write(r.stdout[-4000:] + r.stderr[-4000:])
            if os.path.exists(part):
                os.unlink(part)
            return fail(f"{a.model}: llama.cpp's converter failed (exit {r.returncode}); its output is above")
        os.replace(part, out)
    print(f"to_gguf: {a.model} -> {out} ({a.outtype})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
