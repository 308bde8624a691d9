# Test of the transformers adapter's scenarios (docs/SCENARIOS.md): cache ON/OFF and both sides of prefix, chunked,
# refill, restore and batch (left-padded) on llama2-tiny (fp16, sdpa) with their K/V rows (--kv), judged by
# `kvconf check --dir --model` (exit 0: every rule passes), with the paths the sides reported checked
# (scenario_path), restore bitwise and the cached K/V compared (cached_kv); then the planted narrow cache
# (planted_narrow_cache.py) must fail cached_kv, and each planted scenario fault (planted_scenario_faults.py) the rule
# that names it, and each planted path lie (planted_path_lies.py) scenario_path naming the call's field. Prints each
# scenario's verdicts. The ten adapter runs share this process (their scripts' main()s,
# called as their command lines would be): one import of torch and transformers instead of ten, about 5 s each here;
# the command line itself is HfAdapter's test (test_hf_trace.py).
"""Usage: test_hf_scenarios.py --fixtures DIR --kvconf EXE --out DIR   (exit 0 pass, 1 fail)"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import kvconf_hf_trace  # noqa: E402
import planted_narrow_cache  # noqa: E402
import planted_path_lies  # noqa: E402
import planted_scenario_faults  # noqa: E402
import scenario_list  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--kvconf", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.out, ignore_errors=True)
    traces = os.path.join(a.out, "traces")
    model = os.path.join(a.fixtures, "models", "llama2-tiny")
    failures = []
    def adapter(script_main, scenario, folder, *first):
        argv = [*first, "--model", model, "--prompts", os.path.join(a.fixtures, "prompts", "gsm8k.json"), "--n", "2",
                "--max-new-tokens", "8", "--dtype", "float16", "--attention", "sdpa", "--scenario", scenario,
                "--chunk", "5", "--at-step", "3", "--kv", "--out", folder]
        rc = script_main(argv)
        if rc != 0:
            raise SystemExit(f"{script_main.__module__}.py {' '.join(argv)} exited {rc}")

    for scenario in scenario_list.NAMES:  # engine/scenarios.json: every scenario kvconf knows
        adapter(kvconf_hf_trace.main, scenario, traces)
    out = os.path.join(a.out, "check")
    p = subprocess.run([a.kvconf, "check", "--dir", traces, "--model", model, "--out", out], capture_output=True,
                       text=True)
    print(p.stdout[-2000:], p.stderr[-2000:])
    if p.returncode != 0:
        failures.append(f"kvconf check exited {p.returncode}")
    records = [json.loads(line) for line in open(os.path.join(out, "pairs.jsonl"))]
    seen = {}
    for r in records:
        rules = {x["rule"]: x for x in r["rules"]}
        # The profile names the scenario and the option a folder may hold several of ("+chunked5", "+restore3").
        scenario = re.sub(r"\d+$", "", r["profile"].split("+")[-1]) if "+" in r["profile"] else "cache"
        seen[scenario] = seen.get(scenario, 0) + 1
        print(f"{r['profile']} {r['prompt_id']}: " + ", ".join(f"{k} {'pass' if v['pass'] else 'FAIL'}"
                                                              for k, v in rules.items()))
        for rule in ("scenario_path", "cached_kv"):
            if rule not in rules or not rules[rule]["pass"]:
                failures.append(f"{r['profile']} {r['prompt_id']}: {rule} missing or failed")
        if scenario == "restore" and not rules.get("scenario_bitwise", {}).get("pass"):
            failures.append(f"{r['profile']} {r['prompt_id']}: restore not bitwise")
        if scenario in ("refill", "restore") and not rules.get("scenario_shared_steps_bitwise", {}).get("pass"):
            failures.append(f"{r['profile']} {r['prompt_id']}: steps before the event differ")
    if seen != {name: 2 for name in scenario_list.NAMES}:
        failures.append(f"pairs per scenario: {seen}")

    def planted(label, folder, rule, naming=""):
        """kvconf check on a planted adapter's traces: exit 1, and `rule` failing on every pair (its detail holding
        `naming`)."""
        out = folder + "-check"
        p = subprocess.run([a.kvconf, "check", "--dir", folder, "--model", model, "--out", out], capture_output=True,
                           text=True)
        if p.returncode != 1:
            failures.append(f"{label}: kvconf check exited {p.returncode}, expected 1 (a rule failed)")
        for line in open(os.path.join(out, "pairs.jsonl")):
            r = json.loads(line)
            rules = {x["rule"]: x for x in r["rules"]}
            print(f"planted {label} {r['prompt_id']}: " + ", ".join(f"{k} {'pass' if v['pass'] else 'FAIL'}"
                                                                     for k, v in rules.items()))
            x = rules.get(rule, {})
            if x.get("pass", True) or naming not in x.get("detail", ""):
                failures.append(f"planted {label} {r['prompt_id']}: {rule} did not fail naming '{naming}': {x}")

    # The planted narrow cache: the cache-ON side keeps K/V with bf16's 8 significand bits.
    folder = os.path.join(a.out, "narrow_cache")
    adapter(planted_narrow_cache.main, "cache", folder)
    planted("narrow cache", folder, "cached_kv", "layer 0 row")
    # The planted scenario faults (planted_scenario_faults.py): each must fail the rule that names it.
    for fault, scenario, rule in (("prefix_row_short", "prefix", "scenario_path"),
                                  ("chunk_boundary_skip", "chunked", "scenario_path"),
                                  ("batch_padding_leaks", "batch", "perturbation_rounding_sized")):
        folder = os.path.join(a.out, fault)
        adapter(planted_scenario_faults.main, scenario, folder, fault)
        planted(fault, folder, rule)
    # The planted path lies (planted_path_lies.py): logits a correct run could give, calls the engine reported.
    for fault, scenario, naming in (("recompute_on", "cache", "calls[1] fed"),
                                    ("batch_alone", "batch", "calls[0] batch")):
        folder = os.path.join(a.out, fault)
        adapter(planted_path_lies.main, scenario, folder, fault)
        planted(fault, folder, "scenario_path", naming)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
