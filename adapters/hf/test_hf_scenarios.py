# Test of the transformers adapter's scenarios (docs/SCENARIOS.md): both sides of prefix, chunked, refill and restore
# on llama2-tiny (fp16, sdpa), judged by `kvconf check --dir --model` (exit 0: every rule passes), with the paths the
# sides reported checked (scenario_path) and restore bitwise; prints each scenario's verdicts and differences.
"""Usage: test_hf_scenarios.py --fixtures DIR --kvconf EXE --out DIR   (exit 0 pass, 1 fail)"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


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
    for scenario in ("prefix", "chunked", "refill", "restore"):
        subprocess.run([sys.executable, os.path.join(HERE, "kvconf_hf_trace.py"), "--model", model, "--prompts",
                        os.path.join(a.fixtures, "prompts", "gsm8k.json"), "--n", "2", "--max-new-tokens", "8",
                        "--dtype", "float16", "--attention", "sdpa", "--scenario", scenario, "--chunk", "5",
                        "--at-step", "3", "--out", traces], check=True, capture_output=True, text=True)
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
        scenario = r["profile"].split("+")[-1]
        seen[scenario] = seen.get(scenario, 0) + 1
        print(f"{r['profile']} {r['prompt_id']}: " + ", ".join(f"{k} {'pass' if v['pass'] else 'FAIL'}"
                                                              for k, v in rules.items()))
        if "scenario_path" not in rules or not rules["scenario_path"]["pass"]:
            failures.append(f"{r['profile']} {r['prompt_id']}: scenario_path missing or failed")
        if scenario == "restore" and not rules.get("scenario_bitwise", {}).get("pass"):
            failures.append(f"{r['profile']} {r['prompt_id']}: restore not bitwise")
        if scenario in ("refill", "restore") and not rules.get("scenario_shared_steps_bitwise", {}).get("pass"):
            failures.append(f"{r['profile']} {r['prompt_id']}: steps before the event differ")
    if seen != {"prefix": 2, "chunked": 2, "refill": 2, "restore": 2}:
        failures.append(f"pairs per scenario: {seen}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
