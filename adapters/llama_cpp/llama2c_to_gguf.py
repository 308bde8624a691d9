#!/usr/bin/env python3
"""A llama2.c checkpoint (stories260K.bin) as a GGUF file for llama.cpp's `llama` architecture, written with the gguf
writer llama.cpp ships (gguf-py, beside convert_hf_to_gguf.py in the same sdist): llama.cpp's HF converter cannot read
a llama2.c file, and the model's 512-token tokenizer (tok512.model) is not in the shared data. Written atomically.

The layout (karpathy/llama2.c, run.c: Config and memory_map_weights; the same order kvconf's engine/src/llama2c.cpp
reads): 7 int32 header fields (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative
vocab_size means an unshared classifier follows), then fp32 token embedding, the per-layer weights stacked over layers
(attention norm, wq, wk, wv, wo, ffn norm, w1, w2, w3), the final norm, RoPE tables (skipped) and the classifier.

What the GGUF says, and why:
- RoPE: llama2.c rotates adjacent pairs (i, i+1) of each head, which is llama.cpp's normal RoPE of the `llama`
  architecture: q/k rows are written as they are (llama.cpp's HF converter permutes HF's rotate-half into this layout;
  a llama2.c checkpoint is already in it). θ = 10000, ε = 1e-5 (run.c's rmsnorm), context = seq_len.
- The classifier is the embedding when run.c shares it: no `output.weight` (llama.cpp then reuses `token_embd`).
- f16: every 2-D weight rounded to f16 (numpy's round to nearest even), 1-D norms kept in f32, as llama.cpp's
  converter writes MOSTLY_F16.
- The vocabulary: tok512's special and byte pieces where sentencepiece puts them (0 <unk>, 1 <s>, 2 </s>, 3..258 the
  byte pieces <0x00>..<0xFF>) and placeholder pieces for the 253 merged ones: kvconf feeds token ids and never text,
  so the ids are exact and only detokenised text would differ.

Usage: llama2c_to_gguf.py --gguf-py DIR --model stories260K.bin --outtype f32|f16 --out FILE.gguf
Exit 2 with one line on bad input.
"""
from __future__ import annotations

import argparse
import struct
import sys
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

HEADER = ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len")


def fail(msg: str) -> int:
    print(f"llama2c_to_gguf: {msg}", file=sys.stderr)
    return 2


def read_llama2c(path: str) -> tuple[dict[str, int], list[tuple[str, NDArray[np.float32]]]]:
    """The header (a dict) and the tensors in file order, each (name, array) with llama.cpp's GGUF names."""
    size = Path(path).stat().st_size
    with Path(path).open("rb") as f:
        raw = f.read(28)
        if len(raw) < 28:
            raise ValueError(f"{path}: header: file is {size} bytes, shorter than the 28-byte header")
        h = dict(zip(HEADER, struct.unpack("<7i", raw)))
        for k, v in h.items():
            if v == 0 or (v < 0 and k != "vocab_size"):
                raise ValueError(f"{path}: header.{k}: must be positive, got {v}")
        shared = h["vocab_size"] > 0
        vocab, d, hd, L = abs(h["vocab_size"]), h["dim"], h["hidden_dim"], h["n_layers"]
        if d % h["n_heads"] or h["n_heads"] % h["n_kv_heads"]:
            raise ValueError(f"{path}: header.n_heads: {h['n_heads']} heads with {h['n_kv_heads']} kv heads "
                             f"do not divide dim {d}")
        head = d // h["n_heads"]
        kv = h["n_kv_heads"] * head
        rope = 2 * (h["seq_len"] * head // 2)
        expected = 28 + 4 * (vocab * d + L * (2 * d + 2 * d * d + 2 * kv * d + 3 * hd * d) + d + rope +
                             (0 if shared else vocab * d))
        if size != expected:
            raise ValueError(f"{path}: size {size} bytes (expected {expected} for this header)")
        data: NDArray[np.float32] = np.frombuffer(f.read(), dtype="<f4")
    pos = 0

    def take(*shape: int) -> NDArray[np.float32]:
        nonlocal pos
        n = int(np.prod(shape))
        a = data[pos:pos + n].reshape(shape)  # (out, in) per matrix: row i is output i, as nn.Linear
        pos += n
        return a

    out = [("token_embd.weight", take(vocab, d))]
    stacked = [("attn_norm", (d,)), ("attn_q", (d, d)), ("attn_k", (kv, d)), ("attn_v", (kv, d)),
               ("attn_output", (d, d)), ("ffn_norm", (d,)), ("ffn_gate", (hd, d)), ("ffn_down", (d, hd)),
               ("ffn_up", (hd, d))]
    for name, shape in stacked:
        w = take(L, *shape)
        out += [(f"blk.{i}.{name}.weight", w[i]) for i in range(L)]
    out.append(("output_norm.weight", take(d)))
    pos += rope  # freq_cis_real, freq_cis_imag
    if not shared:
        out.append(("output.weight", take(vocab, d)))
    for name, a in out:
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{path}: {name}: non-finite weight")
    return h, out


def vocabulary(n: int) -> tuple[list[str], list[int]]:
    """tok512's layout of special and byte pieces, placeholders for the merged ones (module docstring)."""
    tokens, types = ["<unk>", "<s>", "</s>"], [2, 3, 3]  # gguf TokenType: UNKNOWN, CONTROL
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [6] * 256  # BYTE
    tokens += [f"\u2581piece{i}" for i in range(len(tokens), n)]
    types += [1] * (n - len(types))  # NORMAL
    return tokens[:n], types[:n]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gguf-py", required=True, help="the gguf-py folder llama.cpp ships")
    p.add_argument("--model", required=True, help="a llama2.c .bin checkpoint")
    p.add_argument("--outtype", required=True, choices=["f32", "f16"])
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if not (Path(a.gguf_py) / "gguf" / "gguf_writer.py").is_file():
        return fail(f"{a.gguf_py}: --gguf-py has no gguf/gguf_writer.py")
    if not Path(a.model).is_file():
        return fail(f"{a.model}: --model not found")
    sys.path.insert(0, a.gguf_py)
    import gguf

    try:
        h, tensors = read_llama2c(a.model)
    except ValueError as e:
        return fail(str(e))
    vocab = abs(h["vocab_size"])
    if vocab < 259:
        return fail(f"{a.model}: header.vocab_size: {vocab} ids, fewer than tok512's 3 special and 256 byte pieces")
    out = Path(a.out).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.parent / f".{out.name}.part"
    w = gguf.GGUFWriter(str(part), "llama")
    w.add_name(Path(a.model).stem)
    w.add_context_length(h["seq_len"])
    w.add_embedding_length(h["dim"])
    w.add_block_count(h["n_layers"])
    w.add_feed_forward_length(h["hidden_dim"])
    w.add_head_count(h["n_heads"])
    w.add_head_count_kv(h["n_kv_heads"])
    w.add_rope_dimension_count(h["dim"] // h["n_heads"])
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if a.outtype == "f32" else gguf.LlamaFileType.MOSTLY_F16)
    tokens, types = vocabulary(vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * vocab)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    for name, t in tensors:
        w.add_tensor(name, t.astype(np.float16) if a.outtype == "f16" and t.ndim == 2 else np.array(t, np.float32))
    try:
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    except OSError as e:
        part.unlink(missing_ok=True)
        return fail(f"{out}: cannot write ({e})")
    part.replace(out)
    print(f"llama2c_to_gguf: {a.model} -> {out} ({a.outtype})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
