# pytest: the transformers adapter's scenarios (docs/SCENARIOS.md) pass `kvconf check`, and its planted faults fail it.
"""pytest -s adapters/hf/test_hf_scenarios.py [--fixtures-dir ... --kvconf-exe ... --out-dir ...]
(CTest: HfScenarios.KvconfCheckPassesTransformersScenarios)

Cache ON/OFF and both sides of every other scenario of engine/scenarios.json (prefix, chunked, refill, restore, batch,
left-padded, and preempt) on llama2-tiny (fp16, sdpa) with their K/V rows (--kv), judged by `kvconf check --dir --model`
(exit 0: every rule passes), with the paths the sides reported checked (scenario_path), restore bitwise and the cached
K/V compared (cached_kv); then the planted narrow cache (planted_narrow_cache.py) must fail cached_kv, each planted
scenario fault (planted_scenario_faults.py) the rule that names it, and each planted path lie (planted_path_lies.py)
scenario_path naming the call's field. Prints each pair's verdicts. The adapter runs (one per scenario and one per
plant: 13) share this process (their scripts' main()s, called as their command lines would be): one import of torch and
transformers instead of 13, about 5 s each here; the command line itself is HfAdapter's test (test_hf_trace.py).
"""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Callable

import pytest

import kvconf_hf_trace
import planted_narrow_cache
import planted_path_lies
import planted_scenario_faults
import scenario_list
from adapter_test_support import Check, scenario_of, verdicts
from adapter_test_support import kvconf_check as support_check
from hf_scenarios import UNSUPPORTED

# The scenarios transformers runs: every one of engine/scenarios.json but those it cannot (kv_dtype: exit 2).
NAMES = tuple(n for n in scenario_list.NAMES if n not in UNSUPPORTED)



@dataclasses.dataclass
class Setup:
    out: Path
    model: Path
    prompts: Path
    kvconf: Path


@pytest.fixture(scope="module")
def setup(request: pytest.FixtureRequest, fixtures_dir: Path, kvconf_exe: Path,
          tmp_path_factory: pytest.TempPathFactory) -> Setup:
    given = request.config.getoption("--out-dir")
    out = Path(given) if given else tmp_path_factory.mktemp("hf-scenarios")
    shutil.rmtree(out, ignore_errors=True)
    return Setup(out, fixtures_dir / "models" / "llama2-tiny", fixtures_dir / "prompts" / "gsm8k.json", kvconf_exe)


def run_adapter(s: Setup, script_main: Callable[[list[str]], int], scenario: str, folder: Path, *first: str) -> None:
    """One adapter run in this process, as its command line: 2 prompts x 8 tokens, fp16 sdpa, K/V rows kept."""
    argv = [*first, "--model", str(s.model), "--prompts", str(s.prompts), "--n", "2", "--max-new-tokens", "8",
            "--dtype", "float16", "--attention", "sdpa", "--scenario", scenario, "--chunk", "5", "--at-step", "3",
            "--kv", "--out", str(folder)]
    rc = script_main(argv)
    assert rc == 0, f"{script_main.__module__}.py {' '.join(argv)} exited {rc}"


def kvconf_check(s: Setup, folder: Path, out: Path) -> Check:
    return support_check(s.kvconf, s.model, folder, out)


@pytest.fixture(scope="module")
def checked(setup: Setup) -> Check:
    """Every scenario kvconf knows (engine/scenarios.json) written into one folder, then `kvconf check` on it."""
    traces = setup.out / "traces"
    for scenario in NAMES:
        run_adapter(setup, kvconf_hf_trace.main, scenario, traces)
    return kvconf_check(setup, traces, setup.out / "check")


def test_kvconf_check_passes_every_pair(checked: Check) -> None:
    assert checked.returncode == 0, f"kvconf check exited {checked.returncode}"


def test_two_pairs_of_every_scenario(checked: Check) -> None:
    seen: dict[str, int] = {}
    for r in checked.records:
        seen[scenario_of(r)] = seen.get(scenario_of(r), 0) + 1
    assert seen == {name: 2 for name in NAMES}


def test_unsupported_scenarios_exit_2_naming_why(setup: Setup, capsys: pytest.CaptureFixture[str]) -> None:
    """kv_dtype: transformers has no cache in kvconf's formats; the command line exits 2 before loading anything."""
    assert "kv_dtype" in UNSUPPORTED
    for scenario in UNSUPPORTED:
        rc = kvconf_hf_trace.main(["--model", str(setup.model), "--prompts", str(setup.prompts), "--scenario",
                                   scenario, "--out", str(setup.out / "unsupported")])
        assert rc == 2
        err = capsys.readouterr().err
        assert f"--scenario {scenario} is not supported: " in err and err.count("\n") == 1, err


@pytest.mark.parametrize("scenario", NAMES)
def test_each_pair_keeps_its_path_and_cache(checked: Check, scenario: str) -> None:
    """scenario_path and cached_kv pass on every pair; restore is bitwise; refill, restore and preempt equal before
    the event."""
    failures = []
    for r in (r for r in checked.records if scenario_of(r) == scenario):
        rules = verdicts(r["profile"], r)
        for rule in ("scenario_path", "cached_kv"):
            if rule not in rules or not rules[rule]["pass"]:
                failures.append(f"{r['profile']} {r['prompt_id']}: {rule} missing or failed")
        if scenario == "restore" and not rules.get("scenario_bitwise", {}).get("pass"):
            failures.append(f"{r['profile']} {r['prompt_id']}: restore not bitwise")
        shared_bitwise = rules.get("scenario_shared_steps_bitwise", {}).get("pass")
        if scenario in ("refill", "restore", "preempt") and not shared_bitwise:
            failures.append(f"{r['profile']} {r['prompt_id']}: steps before the event differ")
    assert not failures


@dataclasses.dataclass(frozen=True)
class Plant:
    script: Callable[[list[str]], int]  # the planted adapter's main
    fault: str                          # its first argument ("" for none)
    scenario: str
    rule: str                           # the rule that must fail on every pair
    naming: str = ""                    # what that rule's detail must hold


PLANTS = {
    # The cache-ON side keeps K/V with bf16's 8 significand bits.
    "narrow_cache": Plant(planted_narrow_cache.main, "", "cache", "cached_kv", "layer 0 row"),
    # planted_scenario_faults.py: each must fail the rule that names it.
    "prefix_row_short": Plant(planted_scenario_faults.main, "prefix_row_short", "prefix", "scenario_path"),
    "chunk_boundary_skip": Plant(planted_scenario_faults.main, "chunk_boundary_skip", "chunked", "scenario_path"),
    "batch_padding_leaks": Plant(planted_scenario_faults.main, "batch_padding_leaks", "batch",
                                 "perturbation_rounding_sized"),
    # planted_path_lies.py: logits a correct run could give, calls the engine reported.
    "recompute_on": Plant(planted_path_lies.main, "recompute_on", "cache", "scenario_path", "calls[1] fed"),
    "batch_alone": Plant(planted_path_lies.main, "batch_alone", "batch", "scenario_path", "calls[0] batch"),
}


@pytest.mark.parametrize("name", PLANTS)
def test_planted_fault_fails_its_rule(setup: Setup, name: str) -> None:
    """kvconf check on a planted adapter's traces: exit 1, and the plant's rule failing on every pair (its detail
    naming what the plant names)."""
    plant, folder = PLANTS[name], setup.out / name
    run_adapter(setup, plant.script, plant.scenario, folder, *([plant.fault] if plant.fault else []))
    check = kvconf_check(setup, folder, setup.out / f"{name}-check")
    assert check.returncode == 1, f"kvconf check exited {check.returncode}, expected 1 (a rule failed)"
    assert check.records, "no pairs checked"
    for r in check.records:
        x = verdicts(f"planted {name}", r).get(plant.rule, {})
        assert not x.get("pass", True) and plant.naming in x.get("detail", ""), \
            f"{r['prompt_id']}: {plant.rule} did not fail naming '{plant.naming}': {x}"
