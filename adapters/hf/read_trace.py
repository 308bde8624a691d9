# Minimal kvconf.trace/1 reader (safetensors, jsonschema and torch, no kvconf code): load(path) validates a trace.
"""Read and validate one kvconf.trace/1 file (docs/TRACES.md, docs/schemas/kvconf.trace-1.schema.json).

    from read_trace import load
    meta, tensors = load("gsm8k_0000.float16.sdpa.greedy.s0.on.safetensors")
    tensors["logits"]          # torch.Tensor (T, V) in the stored dtype (torch: numpy has no bfloat16)

The file is opened by safetensors' own reader, and the metadata validated against the trace schema by jsonschema;
what one field cannot say alone is checked here (a format that lacks a field's version, token ids against
model.vocab_size, one draw per token, the calls against call_of_step and cache_after, the tensors' shapes against
the metadata). load() raises ValueError("<file>: <field>: <what>") for anything docs/TRACES.md calls a bad trace: not
a safetensors file or truncated, no kvconf.trace metadata or not JSON, a format other than kvconf.trace/1, a missing
or mistyped field, logits not (T, V), a non-finite logit, a token id outside [0, V), draws outside [0, 1) or of the
wrong length, hidden_states not (T, L + 1, H), k_rows / v_rows on a cache_off trace without kv_step or not
(L, N, D_kv).

CLI: python read_trace.py FILE... prints one summary line per file; exit 2 with one stderr line on a bad trace.
"""
from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, NoReturn

import jsonschema
from jsonschema.exceptions import best_match

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scenario_list import SCENARIOS  # noqa: E402  (engine/scenarios.json: the one list of scenarios)

if TYPE_CHECKING:
    from torch import Tensor

FORMAT = "kvconf.trace/1"
# 1.1 adds scenario, calls and call_of_step; 1.2 the engine's report beside the calls (cache_after, calls_reported_by)
FORMATS = ("kvconf.trace/1", "kvconf.trace/1.1", "kvconf.trace/1.2")
METADATA_KEY = "kvconf.trace"
FLOAT_DTYPES = ("F32", "F16", "BF16")
SCHEMA_FILE = Path(__file__).resolve().parents[2] / "docs" / "schemas" / "kvconf.trace-1.schema.json"


def _fail(path: str, field: str, what: str) -> NoReturn:
    raise ValueError(f"{path}: {field}: {what}")


@functools.lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    """The trace schema's validator (the schema itself checked against its draft once)."""
    with SCHEMA_FILE.open(encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _field(parts: Iterable[str | int]) -> str:
    """A JSON path as the messages name fields: strategy.top_p, calls[1], prompt_ids[0]."""
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


def _check_schema(path: str, meta: dict[str, Any]) -> None:
    """The metadata against docs/schemas/kvconf.trace-1.schema.json: the first error, by jsonschema's relevance."""
    error = best_match(_validator().iter_errors(meta))
    if error is None:
        return
    where = list(error.absolute_path)
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [k for k in error.validator_value if k not in error.instance]
        _fail(path, _field([*where, missing[0]]), "missing")
    if error.validator == "dependentRequired" and isinstance(error.instance, dict):
        for key, needs in error.validator_value.items():
            lacking = [k for k in needs if k not in error.instance]
            if key in error.instance and lacking:
                _fail(path, _field([*where, key]), f"needs {' and '.join(lacking)} beside it")
    _fail(path, _field(where) or METADATA_KEY, error.message)


def _parse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _check_versions(path: str, meta: dict[str, Any]) -> None:
    """The fields a format version added, in an older one."""
    new = [k for k in ("scenario", "calls", "call_of_step") if k in meta]
    if new and meta["format"] == "kvconf.trace/1":
        _fail(path, new[0], "needs format kvconf.trace/1.1")
    report = [k for k in ("cache_after", "calls_reported_by") if k in meta]
    if report and meta["format"] != "kvconf.trace/1.2":
        _fail(path, report[0], "needs format kvconf.trace/1.2")


def _check_scenario(path: str, meta: dict[str, Any]) -> None:
    """1.1: scenario {name, side, ...} and calls [[fed, cached], ...] with call_of_step (one call index per token)."""
    sc = meta.get("scenario", {"name": "cache"})
    if sc["name"] not in SCENARIOS:
        _fail(path, "scenario.name", f"{sc['name']!r} is not a known scenario")
    sides = (SCENARIOS[sc["name"]]["side_a"], SCENARIOS[sc["name"]]["side_b"])
    if sides != ("cache_on", "cache_off") and sc.get("side") not in sides:
        _fail(path, "scenario.side", f"{sc.get('side')!r} is not {' or '.join(sides)}")
    if ("calls" in meta) != ("call_of_step" in meta):
        _fail(path, "calls", "calls and call_of_step come together")
    if "calls" not in meta:
        return
    calls = meta["calls"]
    for i, c in enumerate(calls):
        if len(c) == 3 and c[2] < c[0]:
            _fail(path, f"calls[{i}]", f"{c!r}: the call's tokens ({c[2]}) are fewer than the tokens it fed ({c[0]})")
    cs = meta["call_of_step"]
    if len(cs) != len(meta["generated_ids"]):
        _fail(path, "call_of_step", f"not a list of {len(meta['generated_ids'])} call indices")
    for i, k in enumerate(cs):
        if not k < len(calls) or (i and k <= cs[i - 1]):
            _fail(path, f"call_of_step[{i}]", "not an increasing index into calls")
    if meta["format"] == "kvconf.trace/1.2":
        after = meta.get("cache_after")
        if after is None or len(after) != len(calls):
            _fail(path, "cache_after", f"not a list of {len(calls)} row counts (one per call)")


def _check_meta(path: str, meta: Any) -> None:
    if not isinstance(meta, dict):
        _fail(path, METADATA_KEY, "not a JSON object")
    if "format" not in meta:
        _fail(path, "format", "missing")
    if meta["format"] not in FORMATS:  # before the schema: a newer format is named as such
        _fail(path, "format", f"'{meta['format']}' is not {' or '.join(FORMATS)}")
    _check_versions(path, meta)
    _check_schema(path, meta)
    V = meta["model"]["vocab_size"]
    for k in ("prompt_ids", "generated_ids"):
        for i, t in enumerate(meta[k]):
            if not t < V:
                _fail(path, f"{k}[{i}]", f"token id {t} outside [0, {V})")
    _check_scenario(path, meta)
    if "draws" in meta and len(meta["draws"]) != len(meta["generated_ids"]):
        _fail(path, "draws", f"{len(meta['draws'])} entries for {len(meta['generated_ids'])} generated tokens")


def _check_tensors(path: str, meta: dict[str, Any], infos: dict[str, tuple[str, tuple[int, ...]]]) -> None:
    """The tensors' dtypes and shapes (from the safetensors header) against the metadata."""
    T, V = len(meta["generated_ids"]), meta["model"]["vocab_size"]
    L, H = meta["model"].get("n_layers"), meta["model"].get("hidden_size")

    def expect(name: str, shape: tuple[int, ...] | None, ndim: int) -> None:
        dtype, got = infos[name]
        if dtype not in FLOAT_DTYPES:
            _fail(path, name, f"dtype {dtype} is not F32, F16 or BF16")
        if len(got) != ndim or (shape is not None and got != shape):
            _fail(path, name, f"shape {list(got)}, expected {list(shape) if shape is not None else f'{ndim}-D'}")

    if "logits" not in infos:
        _fail(path, "logits", "missing tensor")
    expect("logits", (T, V), 2)
    if "hidden_states" in infos:
        if L is None or H is None:
            _fail(path, "model.n_layers" if L is None else "model.hidden_size",
                  "required when hidden_states is present")
        expect("hidden_states", (T, L + 1, H), 3)
    kv = [k for k in ("k_rows", "v_rows") if k in infos]
    if kv:
        if meta["path"] != "cache_on" and "kv_step" not in meta:
            _fail(path, kv[0], "present on a cache_off trace without kv_step (the step whose recompute computed them)")
        if len(kv) != 2:
            _fail(path, "v_rows" if kv == ["k_rows"] else "k_rows", "missing (k_rows and v_rows come together)")
        expect("k_rows", None, 3)
        expect("v_rows", None, 3)
        if infos["k_rows"][1] != infos["v_rows"][1]:
            _fail(path, "v_rows", "shape differs from k_rows")
        if L is not None and infos["k_rows"][1][0] != L:
            _fail(path, "k_rows", f"{infos['k_rows'][1][0]} layers, model.n_layers is {L}")


def load(path: str) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """(metadata dict, {tensor name: torch.Tensor}) of a valid kvconf.trace/1 file; ValueError naming file and field."""
    import torch
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(path, framework="pt") as f:
            md = f.metadata() or {}
            infos = {name: (f.get_slice(name).get_dtype(), tuple(f.get_slice(name).get_shape())) for name in f.keys()}
            if METADATA_KEY not in md:
                _fail(path, "__metadata__", f"no '{METADATA_KEY}' key")
            try:
                meta = json.loads(md[METADATA_KEY], parse_constant=_parse_constant)
            except ValueError as e:  # json.JSONDecodeError too
                _fail(path, METADATA_KEY, f"not JSON ({getattr(e, 'msg', e)})")
            _check_meta(path, meta)
            _check_tensors(path, meta, infos)
            tensors = {name: f.get_tensor(name) for name in f.keys()}
    except SafetensorError as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        _fail(path, "file", f"not a safetensors file or truncated ({why})")
    except OSError as e:
        _fail(path, "file", f"cannot read ({e.strerror or e})")
    for name in ("logits", "hidden_states", "k_rows", "v_rows"):
        if name in tensors and not bool(torch.isfinite(tensors[name]).all()):
            bad = torch.nonzero(~torch.isfinite(tensors[name]))[0].tolist()
            _fail(path, name, f"non-finite value at {bad}")
    return meta, tensors


def summary(path: str, meta: dict[str, Any], tensors: dict[str, Tensor]) -> str:
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
