#!/usr/bin/env python3
# Writes the committed seed corpora fuzz/corpus/<harness>/ and dictionaries fuzz/dict/ from kvconf's real inputs:
# the fixtures' config.json and prompt sets, ../shared (GSM8K, stories260K's header layout), golden/baselines/cpu,
# and the result folders and traces the CLI tests write under build/tests (run after a normal build). Each seed is
# cut down to a few KB. Usage: python3 fuzz/make_seeds.py [--build build] [--shared ../shared]
import argparse
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEP = b"\n=====\n"  # split_parts() in fuzz/drivers.cpp


def out(harness, name, data):
    d = os.path.join(ROOT, "fuzz", "corpus", harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def f16(x):
    return struct.pack("<e", x)


def bf16(x):
    return struct.pack("<f", x)[2:]


def safetensors(tensors, metadata=None):
    """tensors: list of (name, dtype, shape, list of floats) -> bytes of a .safetensors file."""
    header, blobs, at = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, values in tensors:
        enc = {"F32": lambda v: struct.pack("<f", v), "F16": f16, "BF16": bf16}[dtype]
        blob = b"".join(enc(v) for v in values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    h = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def values(n, seed=1):
    return [((i * 7 + seed) % 11 - 5) / 8.0 for i in range(n)]


def tiny_weights(cfg, dtype):
    """Every tensor the loader asks for (engine/src/model_load.cpp for_each_weight) at the config's shapes."""
    h, inter = cfg["hidden_size"], cfg["intermediate_size"]
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    hd = cfg.get("head_dim", h // heads)
    v = cfg["vocab_size"]
    gemma = cfg["model_type"] == "gemma2"
    t = [("model.embed_tokens.weight", dtype, [v, h], values(v * h))]
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        t += [(p + "input_layernorm.weight", dtype, [h], values(h, 2)),
              (p + "self_attn.q_proj.weight", dtype, [heads * hd, h], values(heads * hd * h, 3)),
              (p + "self_attn.k_proj.weight", dtype, [kv * hd, h], values(kv * hd * h, 4)),
              (p + "self_attn.v_proj.weight", dtype, [kv * hd, h], values(kv * hd * h, 5)),
              (p + "self_attn.o_proj.weight", dtype, [h, heads * hd], values(heads * hd * h, 6)),
              (p + "post_attention_layernorm.weight", dtype, [h], values(h, 7))]
        if gemma:
            t += [(p + "pre_feedforward_layernorm.weight", dtype, [h], values(h, 8)),
                  (p + "post_feedforward_layernorm.weight", dtype, [h], values(h, 9))]
        t += [(p + "mlp.gate_proj.weight", dtype, [inter, h], values(inter * h, 10)),
              (p + "mlp.up_proj.weight", dtype, [inter, h], values(inter * h, 11)),
              (p + "mlp.down_proj.weight", dtype, [h, inter], values(inter * h, 12))]
    t.append(("model.norm.weight", dtype, [h], values(h, 13)))
    if not cfg.get("tie_word_embeddings", gemma):
        t.append(("lm_head.weight", dtype, [v, h], values(v * h, 14)))
    return t


def shrink(cfg):
    """A real fixture config.json with its sizes cut to a few elements (every other field as written)."""
    c = dict(cfg)
    c.update(vocab_size=8, hidden_size=4, intermediate_size=8, num_hidden_layers=2, num_attention_heads=2,
             max_position_embeddings=16)
    c["num_key_value_heads"] = 1 if cfg.get("num_key_value_heads", 1) != cfg.get("num_attention_heads") else 2
    if "head_dim" in c:
        c["head_dim"] = 2
    for k in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if isinstance(c.get(k), int):
            c[k] = min(c[k], 7)
    if "layer_types" in c:
        c["layer_types"] = c["layer_types"][:2]
    if isinstance(c.get("sliding_window"), int):
        c["sliding_window"] = 4
    return c


def llama2c(dim, hidden, layers, heads, kv, vocab, seq_len, shared=True):
    """A llama2.c .bin (karpathy/llama2.c run.c layout) with small deterministic weights."""
    head = dim // heads
    n = (vocab * dim + layers * (2 * dim + dim * dim + 2 * kv * head * dim + dim * dim + 3 * hidden * dim) + dim +
         2 * (seq_len * head // 2) + (0 if shared else vocab * dim))
    hdr = struct.pack("<7i", dim, hidden, layers, heads, kv, vocab if shared else -vocab, seq_len)
    return hdr + b"".join(struct.pack("<f", v) for v in values(n))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    a = ap.parse_args()
    models = os.path.join(a.build, "fixtures", "models")

    # safetensors: the three dtypes, metadata, an empty tensor, and two real kvconf.trace/1 files.
    out("safetensors", "three_dtypes", safetensors(
        [("a", "F32", [2, 2], values(4)), ("b", "F16", [3], values(3)), ("c", "BF16", [1, 2], values(2))],
        {"format": "pt"}))
    out("safetensors", "empty_tensor", safetensors([("e", "F32", [0, 4], []), ("x", "F16", [1], [1.0])]))
    traces = os.path.join(a.build, "tests", "tools", "cli-check", "t")
    for name in ("good.on", "good.off", "prefill.on", "kv_in_off", "draws_outside", "wrong_shape", "nan_logits",
                 "no_metadata", "truncated"):
        p = os.path.join(traces, name + ".safetensors")
        if os.path.exists(p):
            data = open(p, "rb").read()
            out("trace", name, data)
            if name in ("good.on", "truncated"):
                out("safetensors", "trace_" + name, data)

    # config.json: every fixture's, as written; checkpoint: each shrunk, with its weights (single file and sharded).
    for m in sorted(os.listdir(models)) if os.path.isdir(models) else []:
        cf = os.path.join(models, m, "config.json")
        if not os.path.exists(cf):
            continue
        cfg = json.load(open(cf))
        out("config", m, json.dumps(cfg, indent=1))
        small = shrink(cfg)
        weights = tiny_weights(small, "F16" if m.startswith("gemma") else "BF16" if "mistral" in m else "F32")
        out("checkpoint", m, json.dumps(small).encode() + SEP + safetensors(weights))
        if m == "llama2-tiny":
            index = {"metadata": {"total_size": 0},
                     "weight_map": {w[0]: "model-00001-of-00001.safetensors" for w in weights}}
            out("checkpoint", m + "_sharded",
                json.dumps(small).encode() + SEP + safetensors(weights) + SEP + json.dumps(index).encode())
    if not os.path.isdir(models):
        print("make_seeds.py: no", models, "(build first): config and checkpoint seeds skipped", file=sys.stderr)

    # llama2.c: stories260K's header fields (dim 64, hidden 172, 5 layers, 8 heads, 4 kv, vocab 512, seq 512) scaled
    # down, shared and unshared classifier; plus the real header with its weights cut off (a truncation).
    out("llama2c", "tiny_shared", llama2c(4, 8, 1, 2, 1, 8, 4, shared=True))
    out("llama2c", "tiny_unshared", llama2c(4, 6, 2, 2, 2, 6, 2, shared=False))
    stories = os.path.join(a.shared, "models", "stories260K", "stories260K.bin")
    if os.path.exists(stories):
        out("llama2c", "stories260K_header", open(stories, "rb").read()[:64])

    # GSM8K: the first lines of the real test set.
    gsm = os.path.join(a.shared, "data", "gsm8k", "test.jsonl")
    lines = open(gsm, "rb").read().splitlines(keepends=True)[:4] if os.path.exists(gsm) else []
    if lines:
        out("gsm8k", "first3", b"".join(lines[:3]))
        out("gsm8k", "first4_blank_line", lines[0] + b"\n" + b"".join(lines[1:4]))

    # Prompt sets: the fixtures' files, three prompts each.
    for name in ("stories.json", "gsm8k.json"):
        p = os.path.join(a.build, "fixtures", "prompts", name)
        if os.path.exists(p):
            j = json.load(open(p))
            j["prompts"] = [dict(q, ids=q["ids"][:24], text=q.get("text", "")[:80]) for q in j["prompts"][:3]]
            out("prompts", name.replace(".json", ""), json.dumps(j, indent=1))

    # Golden baselines: the committed CPU baselines with two entries each.
    gold = os.path.join(ROOT, "golden", "baselines", "cpu")
    for name in ("tokens-fp16-eager.json", "kernels.json"):
        j = json.load(open(os.path.join(gold, name)))
        j["tokens"], j["kernels"] = j["tokens"][:2], j["kernels"][:2]
        for t in j["tokens"]:
            for k in ("free_on", "free_off", "teacher_on", "teacher_off"):
                t[k] = t[k][:8]
        out("golden", name.replace(".json", ""), json.dumps(j, indent=1))

    # Result store / report: records kvconf wrote (kvconf check's pairs, the plugin sweep's kernel cases).
    pairs_f = os.path.join(a.build, "tests", "tools", "cli-check", "good", "pairs.jsonl")
    kern_f = os.path.join(a.build, "tests", "plugin", "cli-plugin", "example", "kernels.jsonl")
    man_f = os.path.join(a.build, "tests", "plugin", "cli-plugin", "example", "manifest.json")
    if os.path.exists(pairs_f) and os.path.exists(kern_f):
        pairs = open(pairs_f, "rb").read().splitlines(keepends=True)[:2]
        kern = open(kern_f, "rb").read().splitlines(keepends=True)[:2]
        out("result_store", "pairs", b"\x00" + b"".join(pairs))
        out("result_store", "pairs_torn", b"\x00" + b"".join(pairs) + pairs[0][:40])
        out("result_store", "kernels", b"\x01" + b"".join(kern))
        out("report", "pairs_kernels_manifest", b"".join(pairs) + SEP + b"".join(kern) + SEP + open(man_f, "rb").read())
        out("report", "pairs_only", b"".join(pairs))
        out("report", "kernels_only", SEP + b"".join(kern))
        # plugin_table: the example plugin's kernels (examples/plugin/register.c), serialized as wire.cpp does.
        table = b""
        names = sorted({json.loads(k)["kernel"].split(".", 2)[2] for k in open(kern_f, "rb").read().splitlines()})
        for n in names:
            kind = 1 if n.startswith("gemm") else 2 if n.startswith("norm") else 3
            fmt = 2 if n.endswith("f16") else 3 if n.endswith("bf16") else 1
            s = lambda b: struct.pack("<I", len(b)) + b
            acc = 2 if ".acc16." in n else 1  # the one kernel declaring an fp16 accumulator (ABI version 2)
            # name, name_null, abi, kind in acc out cache_invariant deterministic pv_acc flags, exp ulps, mirrors,
            # has_run, has_supports
            table += (s(n.encode()) + struct.pack("<II", 0, 2) + struct.pack("<8i", kind, fmt, acc, fmt, 1, 1, 0, 0) +
                      struct.pack("<I", 4) + s(b"example: " + n.encode()) + struct.pack("<II", 1, 0))
        out("plugin_table", "example_plugin", struct.pack("<I", len(names)) + table)
    else:
        print("make_seeds.py: no CLI test outputs under", a.build, "(run the tests first)", file=sys.stderr)

    # tokenizer: a small SentencePiece model trained on GSM8K questions (python sentencepiece from .venv).
    try:
        import sentencepiece as spm
        import io
        text = [json.loads(l)["question"] for l in open(gsm, "rb").read().splitlines()[:200]]
        for kind, size in (("bpe", 120), ("unigram", 100)):
            buf = io.BytesIO()
            spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_writer=buf, vocab_size=size,
                                           model_type=kind, character_coverage=1.0, minloglevel=2,
                                           normalization_rule_name="identity")
            out("tokenizer", "gsm8k_" + kind, buf.getvalue())
    except Exception as e:  # noqa: BLE001 - the seed is optional
        print("make_seeds.py: tokenizer seeds skipped:", e, file=sys.stderr)

    # tokenizer_json: byte-level BPE tokenizer.json files (a second part, after SEP, is the tokenizer_config.json the
    # driver writes beside it). GPT-2's byte alphabet (bytes_to_unicode): "Ġ" U+0120 is the space byte, "Ċ" U+010A the
    # newline, "Ā" U+0100 byte 0, "Ń" U+0143 byte 173 (the alphabet's last code point), "¡" and "ÿ" bytes 161 and 255.
    def tok_json(vocab, decoder="ByteLevel", added=None):
        added = [{"id": max(vocab.values()) + 1, "content": "<|im_end|>", "special": True}] if added is None else added
        return json.dumps({"added_tokens": added,
                           "model": {"type": "BPE", "vocab": vocab, "merges": ["Ġ w", "o r"]},
                           "decoder": {"type": decoder}}, ensure_ascii=False, indent=1)
    small = {"H": 0, "i": 1, "Ġw": 2, "orld": 3, "Ċ": 4, "Ā": 5, "Ń": 6, "¡": 7, "ÿ": 8, "Ã©": 9}
    out("tokenizer_json", "small", tok_json(small))
    out("tokenizer_json", "small_with_config", tok_json(small).encode() + SEP +
        b'{"bos_token": "H", "eos_token": {"content": "<|im_end|>", "special": true}}')
    out("tokenizer_json", "near_decoder_wordpiece", tok_json(small, decoder="WordPiece"))
    out("tokenizer_json", "near_raw_space", tok_json(dict(small, **{"a b": 10}), added=[]))  # " " is not in it
    out("tokenizer_json", "near_duplicate_id", tok_json(dict(small, **{"orl": 3})))
    out("tokenizer_json", "near_config_unknown_bos", tok_json(small).encode() + SEP + b'{"bos_token": "<s>"}')
    # SmolLM2-135M-Instruct's own tokenizer.json (build/fixtures/models/smollm2-135m) cut to its first 64 ids, with
    # its tokenizer_config.json.
    smol = os.path.join(models, "smollm2-135m")
    if os.path.exists(os.path.join(smol, "tokenizer.json")):
        j = json.load(open(os.path.join(smol, "tokenizer.json"), encoding="utf-8"))
        j["model"]["vocab"] = {k: i for k, i in j["model"]["vocab"].items() if i < 64}
        j["model"]["merges"] = j["model"]["merges"][:4]
        j["added_tokens"] = [t for t in j["added_tokens"] if t["id"] < 64]
        out("tokenizer_json", "smollm2_first64", json.dumps(j, ensure_ascii=False).encode() + SEP +
            open(os.path.join(smol, "tokenizer_config.json"), "rb").read())


if __name__ == "__main__":
    main()
