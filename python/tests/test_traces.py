"""kvconf.check_traces is `kvconf check` on two trace files: the same records (compared with the kvconf program's
pairs.jsonl on the same files) and a resumable results folder."""
import json
import os
import subprocess

import pytest

import kvconf

CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "fuzz", "corpus", "trace")


def test_check_traces_equals_kvconf_check(tmp_path):
    on, off = os.path.join(CORPUS, "good.on"), os.path.join(CORPUS, "good.off")
    r = kvconf.check_traces(on, off, out=tmp_path / "py")
    assert len(r.records) == 1 and r.results and r.passed, r
    exe = os.environ.get("KVCONF_EXE")
    if not exe:
        pytest.skip("KVCONF_EXE (set by CTest) names the kvconf program")
    subprocess.run([exe, "check", "--on", on, "--off", off, "--out", str(tmp_path / "cli")], check=True,
                   capture_output=True, timeout=300)
    cli = [json.loads(line) for line in (tmp_path / "cli" / "pairs.jsonl").read_text().splitlines()]
    strip = lambda rec: {k: v for k, v in rec.items() if k != "seconds"}
    assert [strip(x) for x in r.records] == [strip(x) for x in cli]
    again = kvconf.check_traces(on, off, out=tmp_path / "py", resume=True)
    assert [strip(x) for x in again.records] == [strip(x) for x in r.records]
