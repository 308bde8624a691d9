# pytest: SmolLM2-135M-Instruct (issue 37) in transformers: its folder loads, and kvconf check judges its pairs.
"""pytest -s adapters/hf/test_smollm2.py [--fixtures-dir ... --kvconf-exe ... --out-dir ...]
(CTest: HfSmolLM2.ConvertedFolderLoadsInTransformers, HfSmolLM2.TransformersFp16PairPassesKvconfCheck)

The build's HF folder of SmolLM2-135M-Instruct (fixtures/real/gguf_to_hf.py: fixtures/models/smollm2-135m) loads in
transformers as the model it is (Llama, 30 layers, 9 query heads over 3 KV heads, vocabulary 49152, tied embeddings);
one fp16 SDPA cache ON/OFF pair of a GSM8K chat prompt (prompts/smollm2-gsm8k.json) passes `kvconf check
--model` (every rule), and the planted path lie recompute_on (planted_path_lies.py: cache ON's decode steps recompute
the whole sequence) fails it naming scenario_path. kvconf's fp32 engine against transformers' fp32 on this model is
tests/adapters/hf_smollm2_test.cpp (HfSmolLM2.Fp32GreedyTokensAndLogitsAgreeWithKvconf).
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Callable

import pytest

import kvconf_hf_trace
import planted_path_lies
from adapter_test_support import Check, verdicts
from adapter_test_support import kvconf_check as support_check

MODEL = "smollm2-135m"
PROMPTS = "smollm2-gsm8k.json"
TOKENS = 6  # the honest pair's steps
LIE_TOKENS = 2  # the planted pair's: the lie shows from its second call, the first decode


@dataclasses.dataclass
class Smol:
    model: Path
    prompts: Path
    kvconf: Path
    out: Path


@pytest.fixture(scope="module")
def smol(request: pytest.FixtureRequest, fixtures_dir: Path, kvconf_exe: Path,
         tmp_path_factory: pytest.TempPathFactory) -> Smol:
    """The model folder (built by the kvconf_smollm2_files target), one prompt of its prompt set, the kvconf program,
    an empty output folder."""
    model, prompts = fixtures_dir / "models" / MODEL, fixtures_dir / "prompts" / PROMPTS
    for p in (model / "config.json", model / "model.safetensors", prompts):
        if not p.is_file():  # CTest registers this file only where CMake found the model (KVCONF_SMOLLM2_EXPECTED)
            why = f"{p} missing (run scripts/smollm2.sh, then build the kvconf_smollm2_files target)"
            if os.environ.get("KVCONF_SMOLLM2_EXPECTED"):
                pytest.fail(why)
            pytest.skip(why)
    given = request.config.getoption("--out-dir")
    out = Path(given) if given else tmp_path_factory.mktemp("hf-smollm2")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    # The shortest of the first 8 prompts (gsm8k_0001, 78 tokens): transformers' CPU fp16 recomputes cost ~1 s a step.
    first = json.loads(prompts.read_text(encoding="utf-8"))["prompts"][:8]
    one = out / "prompt.json"
    one.write_text(json.dumps({"prompts": [min(first, key=lambda p: len(p["ids"]))]}), encoding="utf-8")
    return Smol(model, one, kvconf_exe, out)


def test_converted_folder_loads_in_transformers(smol: Smol) -> None:
    """config.json as SmolLM2-135M is, the fp32 weights load with the head tied to the embeddings, the tokenizer has
    the vocabulary's 49152 entries."""
    model = kvconf_hf_trace.load_model(str(smol.model), "float32", "eager")
    import transformers
    cfg = model.config
    got = {k: getattr(cfg, k) for k in ("model_type", "vocab_size", "hidden_size", "num_hidden_layers",
                                        "num_attention_heads", "num_key_value_heads", "head_dim",
                                        "tie_word_embeddings")}
    got["rope"] = cfg.rope_parameters  # transformers 5 reads rope_theta into it
    assert got == {"model_type": "llama", "vocab_size": 49152, "hidden_size": 576, "num_hidden_layers": 30,
                   "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64, "tie_word_embeddings": True,
                   "rope": {"rope_theta": 100000.0, "rope_type": "default"}}, f"{smol.model}/config.json"
    embed, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    assert tuple(embed.shape) == (49152, 576) and str(embed.dtype) == "torch.float32"
    assert head.data_ptr() == embed.data_ptr(), "lm_head is not tied to embed_tokens"
    tok = transformers.AutoTokenizer.from_pretrained(str(smol.model), local_files_only=True)
    assert len(tok) == 49152, f"{smol.model}/tokenizer.json: {len(tok)} entries"


def run_adapter(s: Smol, script_main: Callable[[list[str]], int], folder: Path, tokens: int, *first: str) -> None:
    """One adapter run in this process, as its command line: the one prompt, fp16 SDPA, greedy."""
    argv = [*first, "--model", str(s.model), "--prompts", str(s.prompts), "--n", "1", "--max-new-tokens",
            str(tokens), "--dtype", "float16", "--attention", "sdpa", "--out", str(folder)]
    rc = script_main(argv)
    assert rc == 0, f"{script_main.__module__}.py {' '.join(argv)} exited {rc}"


def kvconf_check(s: Smol, folder: Path, out: Path) -> Check:
    """`kvconf check --dir folder --model <the fp32 folder>`."""
    return support_check(s.kvconf, s.model, folder, out)


def test_fp16_pair_passes_kvconf_check(smol: Smol) -> None:
    """The honest pair: exit 0, and the rules every cache pair gets all there and passing."""
    run_adapter(smol, kvconf_hf_trace.main, smol.out / "fp16", TOKENS)
    check = kvconf_check(smol, smol.out / "fp16", smol.out / "fp16-check")
    rc, records = check.returncode, check.records
    assert rc == 0, f"kvconf check exited {rc}"
    assert len(records) == 1 and records[0]["profile"] == "fp16-transformers-sdpa"
    rules = verdicts("honest", records[0])
    for rule in ("scenario_path", "prefill_logits_bitwise"):
        assert rules.get(rule, {}).get("pass"), f"{rule} missing or failed: {rules.get(rule)}"
    assert all(r["pass"] for r in rules.values())


def test_planted_recompute_on_fails_scenario_path(smol: Smol) -> None:
    """recompute_on: logits a correct run could give, calls the engine reported; exit 1, scenario_path failing at
    the first decode call (calls[1] fed the whole sequence)."""
    run_adapter(smol, planted_path_lies.main, smol.out / "recompute_on", LIE_TOKENS, "recompute_on")
    check = kvconf_check(smol, smol.out / "recompute_on", smol.out / "recompute_on-check")
    rc, records = check.returncode, check.records
    assert rc == 1, f"kvconf check exited {rc}, expected 1 (a rule failed)"
    assert len(records) == 1, "no pair checked"
    x = verdicts("planted recompute_on", records[0]).get("scenario_path", {})
    assert not x.get("pass", True) and "calls[1] fed" in x.get("detail", ""), \
        f"scenario_path did not fail naming calls[1]: {x}"
