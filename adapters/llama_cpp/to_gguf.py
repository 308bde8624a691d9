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
import subprocess
import sys
import tempfile
from pathlib import Path


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
    model = Path(a.model)
    for f, what in ((Path(a.converter), "--converter"), (Path(a.tokenizer), "--tokenizer"),
                    (model / "config.json", "--model's config.json"),
                    (model / "model.safetensors", "--model's model.safetensors")):
        if not f.is_file():
            return fail(f"{f}: {what} not found")
    try:
        with (model / "config.json").open(encoding="utf-8") as fh:
            json.load(fh)
    except (OSError, json.JSONDecodeError) as e:
        return fail(f"{model / 'config.json'}: not JSON ({e})")
    out = Path(a.out).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kvconf-gguf-") as tmp:
        # The converter reads the tokenizer beside the checkpoint: a folder of links.
        src = Path(tmp) / model.absolute().name
        src.mkdir()
        for name in ("config.json", "model.safetensors"):
            (src / name).symlink_to((model / name).absolute())
        (src / "tokenizer.model").symlink_to(Path(a.tokenizer).absolute())
        part = out.parent / f".{out.name}.part"
        r = subprocess.run([sys.executable, a.converter, str(src), "--outtype", a.outtype, "--outfile", str(part)],
                           capture_output=True, text=True)
        if r.returncode != 0 or not part.is_file():
            sys.stderr.write(r.stdout[-4000:] + r.stderr[-4000:])
            part.unlink(missing_ok=True)
            return fail(f"{a.model}: llama.cpp's converter failed (exit {r.returncode}); its output is above")
        part.replace(out)
    print(f"to_gguf: {a.model} -> {out} ({a.outtype})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
