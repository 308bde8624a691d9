# pytest: vLLM's scenarios (docs/VLLM.md) pass `kvconf check` with vLLM's own path record, and its planted faults and
# path lies fail it, each naming its rule.
"""pytest -s adapters/vllm/test_vllm_scenarios.py [--fixtures-dir ... --kvconf-exe ... --vllm-python ... --out-dir ...]
(CTest: VllmScenarios.*)

Runs in the project's venv (pytest, safetensors); vLLM runs in .venv-vllm: the adapter, kvconf_vllm_trace.py, is
started with --vllm-python, once for every scenario of vLLM (llama2-tiny, fp16, one prompt, 8 tokens) and once per
plant (planted_vllm_faults.py), all runs in one process of that Python (adapters/hf/run_many.py: one import of vLLM).
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from adapter_test_support import Check, scenario_of, verdicts
from adapter_test_support import kvconf_check as support_check

HERE = Path(__file__).resolve().parent
RUN_MANY = HERE.parent / "hf" / "run_many.py"  # several command lines of the adapter in one process
SCENARIOS = ("cache", "prefix", "batch", "chunked", "preempt")


@dataclasses.dataclass(frozen=True)
class Plant:
    scenario: str
    rule: str        # the rule that must fail on the pair
    naming: str = ""  # what that rule's detail must hold


PLANTS = {
    # faults: the logits or the cache are wrong
    "prefix_block_short": Plant("prefix", "scenario_path", "cached 32 (expected 64)"),
    "prefix_foreign_block": Plant("prefix", "perturbation_rounding_sized"),
    "batch_neighbour": Plant("batch", "perturbation_rounding_sized"),
    "preempt_forgets_layer": Plant("preempt", "perturbation_rounding_sized"),
    # path lies: vLLM computed correctly, but not the scenario's path
    "prefix_cold": Plant("prefix", "scenario_path", "cached 0 (expected 64)"),
    "batch_alone": Plant("batch", "scenario_path", "batch"),
    "preempt_room": Plant("preempt", "scenario_path", "(expected 0)"),
}


@dataclasses.dataclass
class Setup:
    out: Path
    model: Path
    prompts: Path
    kvconf: Path


def adapter_argv(s: Setup, folder: Path, scenario: str, *extra: str) -> list[str]:
    return ["--model", str(s.model), "--prompts", str(s.prompts), "--n", "1", "--max-new-tokens", "8", "--dtype",
            "float16", "--scenario", scenario, "--kv", "--out", str(folder), *extra]


@pytest.fixture(scope="module")
def setup(request: pytest.FixtureRequest, fixtures_dir: Path, kvconf_exe: Path, vllm_python: Path,
          tmp_path_factory: pytest.TempPathFactory) -> Setup:
    """Every run of the adapter the tests need, in one vLLM process (run_many.py), before any test looks."""
    given = request.config.getoption("--out-dir")
    out = Path(given) if given else tmp_path_factory.mktemp("vllm-scenarios")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    s = Setup(out, fixtures_dir / "models" / "llama2-tiny", fixtures_dir / "prompts" / "gsm8k.json", kvconf_exe)
    runs = [adapter_argv(s, out / "traces", "all")]
    # a model with sliding-window layers (Gemma-2): its prefix hit (no --kv: vLLM frees the rows outside the window;
    # float32: vLLM refuses Gemma-2 in float16, "numerical instability")
    runs.append(["--model", str(fixtures_dir / "models" / "gemma2-tiny"), "--prompts", str(s.prompts), "--n", "1",
                 "--max-new-tokens", "8", "--dtype", "float32", "--scenario", "prefix", "--out",
                 str(out / "gemma2-prefix")])
    runs += [adapter_argv(s, out / name, p.scenario, "--plant", name) for name, p in PLANTS.items()]
    (out / "runs.json").write_text(json.dumps(runs))
    p = subprocess.run([str(vllm_python), str(RUN_MANY), str(HERE / "kvconf_vllm_trace.py"), str(out / "runs.json")],
                       text=True, capture_output=True)
    sys.stdout.write(p.stdout[-4000:])
    assert p.returncode == 0, f"run_many.py exited {p.returncode}: {p.stderr[-3000:]}"
    return s


def kvconf_check(s: Setup, folder: Path, out: Path, *extra: str) -> Check:
    return support_check(s.kvconf, s.model, folder, out, *extra)


def trace_meta(path: Path) -> dict[str, Any]:
    from safetensors import safe_open
    with safe_open(str(path), "np") as f:
        meta: dict[str, Any] = json.loads(f.metadata()["kvconf.trace"])
    return meta


@pytest.fixture(scope="module")
def honest(setup: Setup) -> Check:
    return kvconf_check(setup, setup.out / "traces", setup.out / "check")


def test_kvconf_check_passes_every_scenario(honest: Check) -> None:
    assert honest.returncode == 0, f"kvconf check exited {honest.returncode}"
    assert sorted(scenario_of(r) for r in honest.records) == sorted(SCENARIOS)
    for r in honest.records:
        rules = verdicts("honest", r)
        assert rules["scenario_path"]["pass"], f"{r['profile']}: scenario_path failed"
        if scenario_of(r) == "preempt":
            assert rules["scenario_shared_steps_bitwise"]["pass"], f"{r['profile']}: steps before the event differ"


def test_each_side_took_its_scenarios_path_by_vllms_report(setup: Setup) -> None:
    """The traced requests did what the scenarios ask, as vLLM reported it (not as the adapter meant it)."""
    t = {p.name.split(".vllm.greedy.s0.")[1].removesuffix(".safetensors"): trace_meta(p)
         for p in (setup.out / "traces").glob("*.safetensors")}
    n = len(t["on"]["prompt_ids"])
    hot = t["prefix.scenario"]
    shared = hot["scenario"]["shared"]
    assert shared == 32 * ((n - 1) // 32) and hot["engine_report"]["num_cached_tokens"] == shared
    assert hot["calls"][0][:2] == [n - shared, shared]
    assert t["prefix.reference"]["engine_report"]["num_cached_tokens"] == 0
    assert all(c[2] > c[0] for c in t["batch.scenario"]["calls"]), "a batched call ran alone"
    assert len({c[2] - c[0] for c in t["batch.scenario"]["calls"][1:]}) > 1, "no request joined or left"
    chunked = t["chunked16.scenario"]["calls"]
    assert [c[:2] for c in chunked[: n // 16]] == [[16, 16 * i] for i in range(n // 16)]
    pre = next(v for k, v in t.items() if k.startswith("preempt") and k.endswith(".scenario"))
    at = pre["scenario"]["at_step"]
    assert pre["engine_report"]["num_preemptions"] == 1
    assert pre["calls"][pre["call_of_step"][at]][:2] == [n + at, 0]
    assert t["on"]["calls"][1][:2] == [1, n] and t["off"]["calls"][1][:2] == [n + 1, 0]


def test_vllm_is_bitwise_where_it_was_measured(setup: Setup, honest: Check) -> None:
    """An explicit expectation (docs/VLLM.md "Findings"): on an AVX2 CPU, vLLM's fp16 llama2-tiny traces agree bit for
    bit in every scenario (kvconf check --expect-bitwise: every step's logits and tokens). It fails when vLLM stops
    being so; on another ISA (other kernels) the result is printed and the expectation is not applied."""
    cpu = trace_meta(next((setup.out / "traces").glob("*.on.safetensors")))["engine_report"]["cpu"]
    check = kvconf_check(setup, setup.out / "traces", setup.out / "check-bitwise", "--expect-bitwise")
    print(f"--expect-bitwise on {cpu}: exit {check.returncode}")
    if cpu["capability"] != "AVX2":
        pytest.skip(f"measured on AVX2 only; this CPU is {cpu['capability']} ({cpu['model']}): "
                    f"--expect-bitwise exited {check.returncode}")
    assert check.returncode == 0, "vLLM's scenarios are no longer bitwise on this CPU (docs/VLLM.md \"Findings\")"


def test_prefix_hits_on_a_sliding_window_model(setup: Setup, fixtures_dir: Path) -> None:
    """vLLM caches only the window's blocks of Gemma-2's sliding-window layers: the donor ends one token past the
    prefix, so the blocks at the prefix's end exist, and the hot side hits them (a donor with a block of its own after
    the prefix left none: num_cached_tokens 0, docs/VLLM.md)."""
    hot = trace_meta(next((setup.out / "gemma2-prefix").glob("*.prefix.scenario.safetensors")))
    assert hot["engine_report"]["num_cached_tokens"] == hot["scenario"]["shared"] > 0
    s = dataclasses.replace(setup, model=fixtures_dir / "models" / "gemma2-tiny")
    check = kvconf_check(s, setup.out / "gemma2-prefix", setup.out / "gemma2-prefix-check")
    assert check.returncode == 0


@pytest.mark.parametrize("name", PLANTS)
def test_planted_fault_fails_its_rule(setup: Setup, name: str) -> None:
    plant = PLANTS[name]
    check = kvconf_check(setup, setup.out / name, setup.out / f"{name}-check")
    assert check.returncode == 1, f"kvconf check exited {check.returncode}, expected 1 (a rule failed)"
    assert len(check.records) == 1
    x = verdicts(f"planted {name}", check.records[0]).get(plant.rule, {})
    assert not x.get("pass", True) and plant.naming in x.get("detail", ""), \
        f"{plant.rule} did not fail naming '{plant.naming}': {x}"
