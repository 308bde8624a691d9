# Converts a llama2.c checkpoint (karpathy/llama2.c run.c format: 7 int32 header fields, fp32 weights in
# memory_map_weights order) into a Hugging Face Llama folder (config.json + model.safetensors), so transformers can
# run it (the cross-check of stories260K, docs/MODELS.md). run.c rotates pairs (2i, 2i+1) of each head; HF's Llama
# rotates (i, i + d/2): the q and k rows of every head are permuted to match (the inverse of the row order llama2.c's
# export.py writes for HF models). Usage: llama2c_to_hf.py MODEL.bin OUT_DIR
from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import NoReturn

import numpy as np
from numpy.typing import NDArray
from safetensors.numpy import save_file

NAMES = ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len")


def fail(path: str, field: str, what: str) -> NoReturn:
    print(f"llama2c_to_hf: {path}: {field}: {what}", file=sys.stderr)
    sys.exit(2)


def to_rotate_half(w: NDArray[np.float32], n_heads: int) -> NDArray[np.float32]:
    """(n_heads·d, dim) rows in run.c's pair order -> HF's half order: row 2i of a head becomes row i, 2i+1 row
    i+d/2."""
    rows, cols = w.shape
    d = rows // n_heads
    return np.asarray(w.reshape(n_heads, d // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols), np.float32)


def main(src: str, out: str) -> int:
    try:
        data = Path(src).read_bytes()
    except OSError as e:
        fail(src, "file", str(e))
    if len(data) < 28:
        fail(src, "header", f"{len(data)} bytes, shorter than the 28-byte header")
    hdr = dict(zip(NAMES, struct.unpack("<7i", data[:28])))
    shared = hdr["vocab_size"] > 0
    V, D, H, L = abs(hdr["vocab_size"]), hdr["dim"], hdr["hidden_dim"], hdr["n_layers"]
    nh, nkv, S = hdr["n_heads"], hdr["n_kv_heads"], hdr["seq_len"]
    for k in NAMES:
        if k != "vocab_size" and hdr[k] <= 0:
            fail(src, f"header.{k}", f"must be positive, got {hdr[k]}")
    if D % nh or nh % nkv:
        fail(src, "header.n_heads", f"{nh} heads and {nkv} kv heads do not divide dim {D}")
    hd = D // nh
    kv = nkv * hd
    f: NDArray[np.float32] = np.frombuffer(data, dtype="<f4", offset=28)
    need = V * D + L * (2 * D + D * D + 2 * kv * D + D * D + 3 * H * D) + D + S * hd + (0 if shared else V * D)
    if f.size < need:
        fail(src, "weights", f"{f.size} floats after the header, {need} needed")
    pos = 0

    def take(*shape: int) -> NDArray[np.float32]:
        nonlocal pos
        n = int(np.prod(shape))
        a = np.array(f[pos:pos + n].reshape(shape), dtype=np.float32)  # a copy
        pos += n
        return a

    t = {"model.embed_tokens.weight": take(V, D)}
    att_norm, wq, wk, wv, wo = take(L, D), take(L, D, D), take(L, kv, D), take(L, kv, D), take(L, D, D)
    ffn_norm, w1, w2, w3 = take(L, D), take(L, H, D), take(L, D, H), take(L, H, D)
    t["model.norm.weight"] = take(D)
    pos += S * hd  # freq_cis_real and freq_cis_imag: (seq_len, head_dim / 2) each
    if not shared:
        t["lm_head.weight"] = take(V, D)
    for i in range(L):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = att_norm[i]
        t[p + "self_attn.q_proj.weight"] = to_rotate_half(wq[i], nh)
        t[p + "self_attn.k_proj.weight"] = to_rotate_half(wk[i], nkv)
        t[p + "self_attn.v_proj.weight"] = wv[i]
        t[p + "self_attn.o_proj.weight"] = wo[i]
        t[p + "post_attention_layernorm.weight"] = ffn_norm[i]
        t[p + "mlp.gate_proj.weight"] = w1[i]
        t[p + "mlp.down_proj.weight"] = w2[i]
        t[p + "mlp.up_proj.weight"] = w3[i]
    cfg = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V, "hidden_size": D,
        "intermediate_size": H, "num_hidden_layers": L, "num_attention_heads": nh, "num_key_value_heads": nkv,
        "head_dim": hd, "max_position_embeddings": S, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "hidden_act": "silu", "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": shared,
        "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32",
    }
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / ".model.safetensors.tmp"
    save_file({k: np.ascontiguousarray(v) for k, v in t.items()}, str(tmp), metadata={"format": "pt"})
    tmp.replace(folder / "model.safetensors")
    with (folder / ".config.json.tmp").open("w") as fh:
        json.dump(cfg, fh, indent=2)
    (folder / ".config.json.tmp").replace(folder / "config.json")
    print(f"llama2c_to_hf: {src} -> {out} ({L} layers, dim {D}, vocab {V}, {'tied' if shared else 'untied'} head)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: llama2c_to_hf.py MODEL.bin OUT_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
