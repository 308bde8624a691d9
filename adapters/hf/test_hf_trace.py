# pytest: the transformers adapter writes llama2-tiny traces that read back as written; bad input exits 2.
"""pytest adapters/hf/test_hf_trace.py [--fixtures-dir build/fixtures]   (CTest: HfAdapter.WritesReadableTraces)

Runs kvconf_hf_trace.py on the llama2-tiny fixture (2 prompts x 8 tokens: fp32 eager greedy with hidden states, and
fp16 sdpa top-k seed 3), reads every trace back with read_trace.py and checks shapes, metadata, the prefill rule
(logits row 0 bitwise equal between the paths in fp32 eager), that the stored tokens are what kvconf's sampler picks
from the stored logits and draws, that both paths share the draws; then bad input (exit 2, one stderr line) and
read_trace.py's refusal of a truncated file, of format kvconf.trace/2 and of a token id outside the vocabulary.
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import pytest

import kvconf_hf_trace as hf
import read_trace

if TYPE_CHECKING:
    from torch import Tensor

HERE = Path(__file__).resolve().parent
ADAPTER = HERE / "kvconf_hf_trace.py"
READER = HERE / "read_trace.py"
T = 8  # tokens per run
N_PROMPTS = 2


@dataclasses.dataclass(frozen=True)
class Config:
    dtype: str
    attention: str
    strategy: str
    seed: int
    hidden: bool


CONFIGS = {"fp32": Config("float32", "eager", "greedy", 0, True), "fp16": Config("float16", "sdpa", "topk", 3, False)}
Trace = tuple[dict[str, Any], dict[str, "Tensor"]]


@dataclasses.dataclass
class Written:
    """The two adapter runs: their folder, and each configuration's exit status, stdout and stderr."""
    folder: Path
    runs: dict[str, tuple[int, str, str]]
    prompts: list[dict[str, Any]]
    model: Path
    prompts_file: Path


def run_cli(args: list[str | Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, timeout=240)


@pytest.fixture(scope="module")
def written(fixtures_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Written:
    """Both configurations written side by side (one torch thread each), as the command line runs them."""
    model = fixtures_dir / "models" / "llama2-tiny"
    prompts_file = fixtures_dir / "prompts" / "gsm8k.json"
    prompts = json.loads(prompts_file.read_text(encoding="utf-8"))["prompts"][:N_PROMPTS]
    folder = tmp_path_factory.mktemp("kvconf-hf-")
    procs = {}
    for key, c in CONFIGS.items():
        cmd = [sys.executable, str(ADAPTER), "--model", str(model), "--prompts", str(prompts_file), "--n",
               str(N_PROMPTS), "--max-new-tokens", str(T), "--dtype", c.dtype, "--attention", c.attention,
               "--strategy", c.strategy, "--seed", str(c.seed), "--out", str(folder / key)]
        if c.hidden:
            cmd.append("--hidden")
        procs[key] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runs = {}
    for key, p in procs.items():
        out, err = p.communicate(timeout=240)
        runs[key] = (p.returncode, out, err)
    return Written(folder, runs, prompts, model, prompts_file)


def trace_path(w: Written, key: str, prompt: int, on_off: str) -> Path:
    c = CONFIGS[key]
    return w.folder / key / hf.trace_filename(w.prompts[prompt]["id"], c.dtype, c.attention, c.strategy, c.seed, on_off)


def load(w: Written, key: str, prompt: int, on_off: str) -> Trace:
    path = trace_path(w, key, prompt, on_off)
    assert path.is_file(), f"{path.name} not written"
    return read_trace.load(str(path))


@pytest.mark.parametrize("key", CONFIGS)
def test_adapter_exits_0_with_one_line_per_trace(written: Written, key: str) -> None:
    rc, out, err = written.runs[key]
    assert rc == 0, f"adapter {key}: exit {rc}: {err.strip()[-500:]}"
    assert len(out.strip().splitlines()) == 2 * N_PROMPTS


@pytest.mark.parametrize("on_off", ["on", "off"])
@pytest.mark.parametrize("prompt", range(N_PROMPTS))
@pytest.mark.parametrize("key", CONFIGS)
def test_trace_reads_back_as_written(written: Written, key: str, prompt: int, on_off: str) -> None:
    c, p = CONFIGS[key], written.prompts[prompt]
    meta, tensors = load(written, key, prompt, on_off)
    lg = tensors["logits"]
    assert tuple(lg.shape) == (T, 32000)
    assert str(lg.dtype) == {"float32": "torch.float32", "float16": "torch.float16"}[c.dtype]
    if c.hidden:
        assert tuple(tensors["hidden_states"].shape) == (T, 3, 256)
    else:
        assert "hidden_states" not in tensors
    assert meta["format"] == "kvconf.trace/1.2"
    # The calls transformers reported: cache ON prefills the prompt, then feeds one token over the cache; cache OFF
    # feeds the whole sequence over no cache at every step.
    path = hf.PATHS[on_off]
    n, steps = len(meta["prompt_ids"]), len(meta["generated_ids"])
    want = ([[n, 0]] + [[1, n + t - 1] for t in range(1, steps)] if path == "cache_on"
            else [[n + t, 0] for t in range(steps)])
    assert meta["calls"] == want
    # The cache object's own rows after each call: cache ON holds what it fed; cache OFF keeps none.
    assert meta["cache_after"] == ([f + c0 for f, c0 in want] if path == "cache_on" else [0] * steps)
    assert "forward pre-hook" in meta["calls_reported_by"]
    assert meta["engine"] == {"name": "transformers", "version": importlib.metadata.version("transformers"),
                              "attention": c.attention}
    m = meta["model"]
    assert (m["name"], m["vocab_size"], m["n_layers"], m["hidden_size"]) == ("llama2-tiny", 32000, 2, 256)
    assert (meta["dtype"], meta["path"]) == (c.dtype, path)
    assert meta["strategy"] == {"name": c.strategy, "top_k": 50, "top_p": 0.9, "temperature": 1.0, "seed": c.seed}
    assert (meta["prompt_id"], meta["prompt_ids"]) == (p["id"], p["ids"])
    assert len(meta["generated_ids"]) == T
    assert meta["draws"] == [hf.step_draw(c.seed, t) for t in range(T)]
    # The stored token is kvconf's choice from the stored logits row and draw (greedy: the arg-max).
    sampler = hf.Sampler(c.strategy, 50, 0.9, 1.0, c.seed)
    assert [hf.sample(lg[t], sampler, meta["draws"][t]) for t in range(T)] == meta["generated_ids"]
    if c.strategy == "greedy":
        assert [int(i) for i in lg.float().argmax(dim=1)] == meta["generated_ids"]


@pytest.mark.parametrize("prompt", range(N_PROMPTS))
@pytest.mark.parametrize("key", CONFIGS)
def test_paths_share_draws_and_fp32_prefill_is_bitwise(written: Written, key: str, prompt: int) -> None:
    """Both paths draw the same u; in fp32 eager the prefill row is the same forward over the same prompt."""
    import torch
    (on, on_t), (off, off_t) = load(written, key, prompt, "on"), load(written, key, prompt, "off")
    assert on["draws"] == off["draws"]
    if key == "fp32":
        assert torch.equal(on_t["logits"][0].view(torch.int32), off_t["logits"][0].view(torch.int32))
        assert on["generated_ids"][0] == off["generated_ids"][0]
        assert torch.equal(on_t["hidden_states"][0].view(torch.int32), off_t["hidden_states"][0].view(torch.int32))


def assert_bad_input(proc: subprocess.CompletedProcess[str], must_name: str | Path) -> None:
    """Exit 2 and one stderr line, no traceback, naming the file or field."""
    err = proc.stderr.strip()
    assert proc.returncode == 2, f"exit {proc.returncode}, expected 2 (stderr: {err[:300]})"
    assert len(err.splitlines()) == 1, f"{len(err.splitlines())} stderr lines, expected 1: {err[:300]}"
    assert "Traceback" not in proc.stderr
    assert str(must_name) in proc.stderr, f"stderr does not name {str(must_name)!r}: {err[:300]}"


def _missing_model(w: Written, tmp: Path) -> tuple[list[str | Path], str | Path]:
    missing = tmp / "no-such-model"
    return ["--model", missing, "--prompts", w.prompts_file, "--out", tmp], missing


def _prompts_not_json(w: Written, tmp: Path) -> tuple[list[str | Path], str | Path]:
    not_json = tmp / "prompts.txt"
    not_json.write_text("this is not JSON\n")
    return ["--model", w.model, "--prompts", not_json, "--out", tmp], not_json


def _id_outside_vocabulary(w: Written, tmp: Path) -> tuple[list[str | Path], str | Path]:
    big = tmp / "big.json"
    big.write_text(json.dumps({"prompts": [{"id": "x", "text": "", "ids": [1, 32000]}]}))
    return ["--model", w.model, "--prompts", big, "--n", "1", "--out", tmp], "ids"


def _unknown_dtype(w: Written, tmp: Path) -> tuple[list[str | Path], str | Path]:
    return ["--model", w.model, "--prompts", w.prompts_file, "--dtype", "fp8", "--out", tmp], "--dtype"


def _no_config(w: Written, tmp: Path) -> tuple[list[str | Path], str | Path]:
    (tmp / "empty-model").mkdir()
    return ["--model", tmp / "empty-model", "--prompts", w.prompts_file, "--out", tmp], "config.json"


BAD_INPUT: dict[str, Callable[[Written, Path], tuple[list[str | Path], str | Path]]] = {
    "missing model folder": _missing_model, "prompt file not JSON": _prompts_not_json,
    "prompt id outside the vocabulary": _id_outside_vocabulary, "unknown --dtype": _unknown_dtype,
    "no config.json": _no_config}


@pytest.mark.parametrize("case", BAD_INPUT)
def test_bad_input_exits_2_naming_it(written: Written, tmp_path: Path, case: str) -> None:
    args, must_name = BAD_INPUT[case](written, tmp_path)
    assert_bad_input(run_cli([ADAPTER, *args]), must_name)


def test_reader_refuses_a_truncated_file(written: Written, tmp_path: Path) -> None:
    data = trace_path(written, "fp16", 0, "on").read_bytes()
    trunc = tmp_path / "truncated.safetensors"
    trunc.write_bytes(data[:len(data) - 1000])
    with pytest.raises(ValueError, match="truncated") as e:
        read_trace.load(str(trunc))
    assert str(trunc) in str(e.value)
    assert_bad_input(run_cli([READER, trunc]), trunc)


def _rewritten(w: Written, tmp: Path, name: str, **fields: Any) -> Path:
    """The fp16 trace of prompt 0, cache ON, written again with some metadata fields replaced."""
    from safetensors.torch import save_file
    meta, tensors = load(w, "fp16", 0, "on")
    out = tmp / name
    save_file(tensors, str(out), metadata={"kvconf.trace": json.dumps({**meta, **fields})})
    return out


def test_reader_refuses_another_format_version(written: Written, tmp_path: Path) -> None:
    v2 = _rewritten(written, tmp_path, "format2.safetensors", format="kvconf.trace/2")
    with pytest.raises(ValueError, match="format") as e:
        read_trace.load(str(v2))
    assert str(v2) in str(e.value)


def test_reader_refuses_a_token_outside_the_vocabulary(written: Written, tmp_path: Path) -> None:
    meta, _ = load(written, "fp16", 0, "on")
    bad = _rewritten(written, tmp_path, "badtok.safetensors", generated_ids=meta["generated_ids"][:-1] + [32000])
    with pytest.raises(ValueError, match=r"generated_ids\[7\]: token id 32000 outside \[0, 32000\)"):
        read_trace.load(str(bad))


SCHEMA_REFUSALS: dict[str, tuple[dict[str, Any], str]] = {
    "top_p over 1": ({"strategy": {"name": "topk", "top_k": 50, "top_p": 1.5, "temperature": 1.0, "seed": 3}},
                     r"strategy\.top_p: 1\.5 is greater than the maximum of 1"),
    "engine without attention": ({"engine": {"name": "transformers", "version": "5"}}, r"engine\.attention: missing"),
    "a call feeding no token": ({"calls": [[0, 0]] + [[1, 0]] * (T - 1)},
                                r"calls\[0\]\[0\]: 0 is less than the minimum of 1"),
    "a NaN draw": ({"draws": [float("nan")] * T}, r"kvconf\.trace: not JSON \(NaN is not JSON\)"),
}


@pytest.mark.parametrize("case", SCHEMA_REFUSALS)
def test_reader_names_the_field_the_schema_refuses(written: Written, tmp_path: Path, case: str) -> None:
    """docs/schemas/kvconf.trace-1.schema.json, applied by jsonschema: the message names the field and the limit."""
    fields, message = SCHEMA_REFUSALS[case]
    with pytest.raises(ValueError, match=message):
        read_trace.load(str(_rewritten(written, tmp_path, "refused.safetensors", **fields)))
