# What every adapter's tests share (adapters/hf, adapters/vllm): their pytest options and fixtures (where the build's
# fixtures and the kvconf program are, a folder kept for traces and checks), and `kvconf check` run on a trace folder.
"""add_options(parser, group, description) adds --fixtures-dir, --kvconf-exe and --out-dir; the fixtures fixtures_dir
and kvconf_exe fail naming what is missing (defaults: build/ beside the source tree). kvconf_check(kvconf, model,
folder, out, *extra) runs `kvconf check --dir` and returns its exit status and pairs.jsonl's records; verdicts(label,
record) gives a record's rules by name (printed as one line); scenario_of(record) the scenario its profile names."""
from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
Record = dict[str, Any]  # one pair's record in pairs.jsonl (kvconf.run_pair)


def add_options(parser: pytest.Parser, group: str, description: str) -> pytest.OptionGroup:
    g = parser.getgroup(group, description)
    g.addoption("--fixtures-dir", default=str(BUILD / "fixtures"),
                help="the build's fixtures folder (models/, prompts/; default build/fixtures)")
    g.addoption("--kvconf-exe", default=str(BUILD / "tools" / "kvconf"), help="the kvconf program")
    g.addoption("--out-dir", default=None,
                help="folder for the traces and checks, emptied first (default: a temporary one)")
    return g


def existing_file(request: pytest.FixtureRequest, option: str, what: str) -> Path:
    """The file an option names, or the test fails naming it and what to do (`what`)."""
    path = Path(request.config.getoption(option))
    if not path.is_file():
        pytest.fail(f"{path}: {what}")
    return path


@pytest.fixture(scope="session")
def fixtures_dir(request: pytest.FixtureRequest) -> Path:
    """The fixtures folder, with llama2-tiny's config.json and the gsm8k prompt set in it."""
    folder = Path(request.config.getoption("--fixtures-dir"))
    for p in (folder / "models" / "llama2-tiny" / "config.json", folder / "prompts" / "gsm8k.json"):
        if not p.is_file():
            pytest.fail(f"fixture {p} missing (build the kvconf_fixture_files target, or pass --fixtures-dir)")
    return folder


@pytest.fixture(scope="session")
def kvconf_exe(request: pytest.FixtureRequest) -> Path:
    return existing_file(request, "--kvconf-exe", "no kvconf program (build the kvconf target, or pass --kvconf-exe)")


@dataclasses.dataclass
class Check:
    returncode: int
    stdout: str
    records: list[Record]


def kvconf_check(kvconf: Path, model: Path, folder: Path, out: Path, *extra: str) -> Check:
    """`kvconf check --dir folder --model model --out out [extra]`: its exit status, stdout and pairs.jsonl's records
    (the output's tails printed)."""
    p = subprocess.run([str(kvconf), "check", "--dir", str(folder), "--model", str(model), "--out", str(out), *extra],
                       capture_output=True, text=True)
    print(p.stdout[-2000:], p.stderr[-2000:])
    pairs = out / "pairs.jsonl"
    records = [json.loads(line) for line in pairs.read_text().splitlines() if line] if pairs.is_file() else []
    return Check(p.returncode, p.stdout, records)


def verdicts(label: str, record: Record) -> dict[str, Record]:
    """The record's rules by name, printed as one line."""
    rules = {x["rule"]: x for x in record["rules"]}
    print(f"{label} {record['profile']} {record['prompt_id']}: "
          + ", ".join(f"{k} {'pass' if v['pass'] else 'FAIL'}" for k, v in rules.items()))
    return rules


def scenario_of(record: Record) -> str:
    """The profile names the scenario and the option a folder may hold several of ("+chunked5", "+restore3")."""
    profile: str = record["profile"]
    return re.sub(r"\d+$", "", profile.split("+")[-1]) if "+" in profile else "cache"
