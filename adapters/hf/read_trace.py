# Minimal kvconf.trace/1 and /1.1 reader (safetensors + json + numpy/torch, no kvconf code): load(path) validates a trace.
"""Read and validate one kvconf.trace/1 file (docs/TRACES.md, docs/schemas/kvconf.trace-1.schema.json).

    from read_trace import load
    meta, tensors = load("gsm8k_0000.float16.sdpa.greedy.s0.on.safetensors")
    tensors["logits"]          # torch.Tensor (T, V) in the stored dtype (torch: numpy has no bfloat16)

load() raises ValueError("<file>: <field>: <what>") for anything docs/TRACES.md calls a bad trace: not a safetensors
file or truncated, no kvconf.trace metadata or not JSON, a format other than kvconf.trace/1, a missing or mistyped
field, logits not (T, V), a non-finite logit, a token id outside [0, V), draws outside [0, 1) or of the wrong length,
hidden_states not (T, L + 1, H), k_rows / v_rows on a cache_off trace without kv_step or not (L, N, D_kv).

CLI: python read_trace.py FILE... prints one summary line per file; exit 2 with one stderr line on a bad trace.
"""
from __future__ import annotations

import json
import math
import os
import struct
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scenario_list import SCENARIOS  # noqa: E402  (engine/scenarios.json: the one list of scenarios)

FORMAT = "kvconf.trace/1"
# 1.1 adds scenario, calls and call_of_step; 1.2 the engine's report beside the calls (cache_after, calls_reported_by)
FORMATS = ("kvconf.trace/1", "kvconf.trace/1.1", "kvconf.trace/1.2")
METADATA_KEY = "kvconf.trace"
FLOAT_DTYPES = ("F32", "F16", "BF16")
_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
                "U16": 2, "U32": 4, "U64": 8, "F8_E4M3": 1, "F8_E5M2": 1}


def _fail(path: str, field: str, what: str):
    raise ValueError(f"{path}: {field}: {what}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def read_header(path: str) -> dict:
    """The safetensors JSON header, after checking that the file holds exactly the bytes it announces."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                _fail(path, "file", "not a safetensors file or truncated (shorter than 8 bytes)")
            (n,) = struct.unpack("<Q", head)
            if n > size - 8 or n > 100_000_000:
                _fail(path, "file", f"not a safetensors file or truncated (header length {n}, file {size} bytes)")
            raw = f.read(n)
    except OSError as e:
        _fail(path, "file", f"cannot read ({e.strerror})")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        _fail(path, "file", "not a safetensors file (the header is not JSON)")
    if not isinstance(header, dict):
        _fail(path, "file", "not a safetensors file (the header is not a JSON object)")
    data_len = size - 8 - n
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict) or not isinstance(info.get("data_offsets"), list) or \
                len(info["data_offsets"]) != 2 or not all(_is_int(o) for o in info["data_offsets"]):
            _fail(path, f"tensor {name}", "malformed safetensors header entry")
        b, e = info["data_offsets"]
        shape = info.get("shape")
        if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
            _fail(path, f"tensor {name}", "malformed shape in the safetensors header")
        count = math.prod(shape)
        if info.get("dtype") in _DTYPE_BYTES and e - b != count * _DTYPE_BYTES[info["dtype"]]:
            _fail(path, f"tensor {name}", "byte range does not match its shape and dtype")
        end = max(end, e)
    if end > data_len:
        _fail(path, "file", f"truncated: tensor data ends at byte {end} of a {data_len}-byte data section")
    return header


def _check_scenario(path: str, meta: dict) -> None:
    """1.1: scenario {name, side, ...} and calls [[fed, cached], ...] with call_of_step (one call index per token)."""
    new = [k for k in ("scenario", "calls", "call_of_step") if k in meta]
    if new and meta["format"] == "kvconf.trace/1":
        _fail(path, new[0], "needs format kvconf.trace/1.1")
    report = [k for k in ("cache_after", "calls_reported_by") if k in meta]
    if report and meta["format"] != "kvconf.trace/1.2":
        _fail(path, report[0], "needs format kvconf.trace/1.2")
    sc = meta.get("scenario", {"name": "cache"})
    if not isinstance(sc, dict) or sc.get("name") not in SCENARIOS:
        _fail(path, "scenario.name", f"{sc.get('name') if isinstance(sc, dict) else sc!r} is not a known scenario")
    sides = (SCENARIOS[sc["name"]]["side_a"], SCENARIOS[sc["name"]]["side_b"])
    if sides != ("cache_on", "cache_off") and sc.get("side") not in sides:
        _fail(path, "scenario.side", f"{sc.get('side')!r} is not {' or '.join(sides)}")
    if ("calls" in meta) != ("call_of_step" in meta):
        _fail(path, "calls", "calls and call_of_step come together")
    if "calls" not in meta:
        return
    calls = meta["calls"]
    if not isinstance(calls, list) or not calls:
        _fail(path, "calls", "not a non-empty list")
    for i, c in enumerate(calls):
        if (not isinstance(c, list) or len(c) not in (2, 3) or not all(_is_int(x) and x >= 0 for x in c) or c[0] < 1
                or (len(c) == 3 and c[2] < c[0])):
            _fail(path, f"calls[{i}]", f"{c!r} is not [tokens fed >= 1, cached rows >= 0(, rows of the call >= fed)]")
    cs = meta["call_of_step"]
    if not isinstance(cs, list) or len(cs) != len(meta["generated_ids"]):
        _fail(path, "call_of_step", f"not a list of {len(meta['generated_ids'])} call indices")
    for i, k in enumerate(cs):
        if not _is_int(k) or not 0 <= k < len(calls) or (i and k <= cs[i - 1]):
            _fail(path, f"call_of_step[{i}]", "not an increasing index into calls")
    if meta["format"] == "kvconf.trace/1.2":
        after = meta.get("cache_after")
        if not isinstance(after, list) or len(after) != len(calls) or not all(_is_int(x) and x >= 0 for x in after):
            _fail(path, "cache_after", f"not a list of {len(calls)} row counts (one per call)")
        by = meta.get("calls_reported_by")
        if not isinstance(by, str) or not by:
            _fail(path, "calls_reported_by", "missing or not a non-empty string")


def _check_meta(path: str, meta: Any) -> None:
    if not isinstance(meta, dict):
        _fail(path, METADATA_KEY, "not a JSON object")
    if "format" not in meta:
        _fail(path, "format", "missing")
    if meta["format"] not in FORMATS:
        _fail(path, "format", f"'{meta['format']}' is not {' or '.join(FORMATS)}")
    for k in ("engine", "model", "dtype", "path", "strategy", "prompt_id", "prompt_ids", "generated_ids"):
        if k not in meta:
            _fail(path, k, "missing")

    eng = meta["engine"]
    if not isinstance(eng, dict):
        _fail(path, "engine", "not an object")
    for k, nonempty in (("name", True), ("version", False), ("attention", True)):
        if k not in eng:
            _fail(path, f"engine.{k}", "missing")
        if not isinstance(eng[k], str) or (nonempty and not eng[k]):
            _fail(path, f"engine.{k}", "not a non-empty string" if nonempty else "not a string")

    model = meta["model"]
    if not isinstance(model, dict):
        _fail(path, "model", "not an object")
    if not isinstance(model.get("name"), str) or not model["name"]:
        _fail(path, "model.name", "missing or not a non-empty string")
    if "path" in model and not isinstance(model["path"], str):
        _fail(path, "model.path", "not a string")
    for k, required in (("vocab_size", True), ("n_layers", False), ("hidden_size", False)):
        if k not in model:
            if required:
                _fail(path, f"model.{k}", "missing")
            continue
        if not _is_int(model[k]) or model[k] < 1:
            _fail(path, f"model.{k}", "not an integer >= 1")

    if meta["dtype"] not in ("float32", "float16", "bfloat16"):
        _fail(path, "dtype", f"{meta['dtype']!r} is not float32, float16 or bfloat16")
    if meta["path"] not in ("cache_on", "cache_off"):
        _fail(path, "path", f"{meta['path']!r} is not cache_on or cache_off")

    st = meta["strategy"]
    if not isinstance(st, dict):
        _fail(path, "strategy", "not an object")
    if st.get("name") not in ("greedy", "topk", "topp"):
        _fail(path, "strategy.name", f"{st.get('name')!r} is not greedy, topk or topp")
    if "top_k" in st and (not _is_int(st["top_k"]) or st["top_k"] < 1):
        _fail(path, "strategy.top_k", "not an integer >= 1")
    if "top_p" in st and (not _is_num(st["top_p"]) or not 0 < st["top_p"] <= 1):
        _fail(path, "strategy.top_p", "not a number in (0, 1]")
    if "temperature" in st and (not _is_num(st["temperature"]) or not st["temperature"] > 0):
        _fail(path, "strategy.temperature", "not a number > 0")
    if "seed" in st and (not _is_int(st["seed"]) or st["seed"] < 0):
        _fail(path, "strategy.seed", "not an integer >= 0")

    if not isinstance(meta["prompt_id"], str) or not meta["prompt_id"]:
        _fail(path, "prompt_id", "not a non-empty string")
    V = model["vocab_size"]
    for k in ("prompt_ids", "generated_ids"):
        ids = meta[k]
        if not isinstance(ids, list) or not ids:
            _fail(path, k, "not a non-empty list")
        for i, t in enumerate(ids):
            if not _is_int(t):
                _fail(path, f"{k}[{i}]", "not an integer")
            if not 0 <= t < V:
                _fail(path, f"{k}[{i}]", f"token id {t} outside [0, {V})")
    _check_scenario(path, meta)
    if "draws" in meta:
        d = meta["draws"]
        if not isinstance(d, list):
            _fail(path, "draws", "not a list")
        if len(d) != len(meta["generated_ids"]):
            _fail(path, "draws", f"{len(d)} entries for {len(meta['generated_ids'])} generated tokens")
        for i, u in enumerate(d):
            if not _is_num(u) or not 0 <= u < 1:
                _fail(path, f"draws[{i}]", f"{u!r} is not a number in [0, 1)")


def load(path: str) -> tuple[dict, dict]:
    """(metadata dict, {tensor name: torch.Tensor}) of a valid kvconf.trace/1 file; ValueError naming file and field."""
    header = read_header(path)
    md = header.get("__metadata__")
    if not isinstance(md, dict) or METADATA_KEY not in md:
        _fail(path, "__metadata__", f"no '{METADATA_KEY}' key")
    if not isinstance(md[METADATA_KEY], str):
        _fail(path, METADATA_KEY, "not a string")
    try:
        meta = json.loads(md[METADATA_KEY])
    except json.JSONDecodeError as e:
        _fail(path, METADATA_KEY, f"not JSON ({e.msg})")
    _check_meta(path, meta)

    infos = {k: v for k, v in header.items() if k != "__metadata__"}
    T, V = len(meta["generated_ids"]), meta["model"]["vocab_size"]
    L, H = meta["model"].get("n_layers"), meta["model"].get("hidden_size")

    def expect(name: str, shape: tuple | None, ndim: int) -> None:
        info = infos[name]
        if info.get("dtype") not in FLOAT_DTYPES:
            _fail(path, name, f"dtype {info.get('dtype')} is not F32, F16 or BF16")
        got = tuple(info["shape"])
        if len(got) != ndim or (shape is not None and got != shape):
            want = shape if shape is not None else f"{ndim}-D"
            _fail(path, name, f"shape {list(got)}, expected {list(want) if shape is not None else want}")

    if "logits" not in infos:
        _fail(path, "logits", "missing tensor")
    expect("logits", (T, V), 2)
    if "hidden_states" in infos:
        if L is None or H is None:
            _fail(path, "model.n_layers" if L is None else "model.hidden_size", "required when hidden_states is present")
        expect("hidden_states", (T, L + 1, H), 3)
    kv = [k for k in ("k_rows", "v_rows") if k in infos]
    if kv:
        if meta["path"] != "cache_on" and "kv_step" not in meta:
            _fail(path, kv[0], "present on a cache_off trace without kv_step (the step whose recompute computed them)")
        if len(kv) != 2:
            _fail(path, "v_rows" if kv == ["k_rows"] else "k_rows", "missing (k_rows and v_rows come together)")
        expect("k_rows", None, 3)
        expect("v_rows", None, 3)
        if tuple(infos["k_rows"]["shape"]) != tuple(infos["v_rows"]["shape"]):
            _fail(path, "v_rows", "shape differs from k_rows")
        if L is not None and infos["k_rows"]["shape"][0] != L:
            _fail(path, "k_rows", f"{infos['k_rows']['shape'][0]} layers, model.n_layers is {L}")

    try:
        from safetensors import safe_open
        tensors = {}
        with safe_open(path, framework="pt") as f:
            for name in f.keys():
                tensors[name] = f.get_tensor(name)
    except Exception as e:  # the header passed, so this is a damaged file
        _fail(path, "file", f"not a readable safetensors file ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
    import torch
    for name in ("logits", "hidden_states", "k_rows", "v_rows"):
        if name in tensors and not bool(torch.isfinite(tensors[name]).all()):
            bad = torch.nonzero(~torch.isfinite(tensors[name]))[0].tolist()
            _fail(path, name, f"non-finite value at {bad}")
    return meta, tensors


def summary(path: str, meta: dict, tensors: dict) -> str:
    st = meta["strategy"]
    dt = {"torch.float32": "F32", "torch.float16": "F16", "torch.bfloat16": "BF16"}
    lg = tensors["logits"]
    extra = ""
    if "hidden_states" in tensors:
        extra += f" hidden_states {list(tensors['hidden_states'].shape)}"
    if "k_rows" in tensors:
        extra += f" k_rows {list(tensors['k_rows'].shape)}"
    return (f"{path}: {meta['format']} {meta['engine']['name']} {meta['engine']['version']} "
            f"{meta['engine']['attention']} {meta['model']['name']} {meta['dtype']} {meta['path']} "
            f"{st['name']} seed {st.get('seed', '-')} prompt {meta['prompt_id']} ({len(meta['prompt_ids'])} ids) "
            f"T={lg.shape[0]} V={lg.shape[1]} logits {dt.get(str(lg.dtype), str(lg.dtype))}{extra} "
            f"tokens {meta['generated_ids'][:8]}{' ...' if len(meta['generated_ids']) > 8 else ''}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: read_trace.py FILE.safetensors... (one summary line per valid kvconf.trace/1 file; exit 2 on a "
              "bad one)", file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    for p in argv:
        try:
            meta, tensors = load(p)
        except ValueError as e:
            print(f"read_trace: {e}", file=sys.stderr)
            return 2
        print(summary(p, meta, tensors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
