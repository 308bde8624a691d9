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
    def strip(rec):
        return {k: v for k, v in rec.items() if k != "seconds"}
    assert [strip(x) for x in r.records] == [strip(x) for x in cli]
    again = kvconf.check_traces(on, off, out=tmp_path / "py", resume=True)
    assert [strip(x) for x in again.records] == [strip(x) for x in r.records]


# --- kvconf.trace/1.1: scenarios, the calls each side reports, --expect-bitwise (docs/TRACES.md, docs/SCENARIOS.md)

V, T = 40, 6
PROMPT = [1, 5, 9, 13]


def write_trace(path, side, scenario=None, logits=None, calls=None, fmt="kvconf.trace/1.1", **extra):
    """A synthetic trace: greedy tokens from `logits` (T, V) float16; `side` is cache_on/cache_off for the cache
    scenario, scenario/reference otherwise."""
    import numpy as np
    from safetensors.numpy import save_file
    z = logits if logits is not None else np.random.default_rng(1).normal(size=(T, V)).astype(np.float16)
    m = {"format": fmt, "engine": {"name": "synthetic", "version": "1", "attention": "eager"},
         "model": {"name": "toy", "vocab_size": V}, "dtype": "float16", "strategy": {"name": "greedy", "seed": 0},
         "prompt_id": "p0", "prompt_ids": PROMPT,
         "generated_ids": [int(i) for i in z.astype(np.float32).argmax(axis=1)]}
    if scenario is None or scenario["name"] == "cache":
        m["path"] = side
    else:
        m["path"] = "cache_on"
        scenario = dict(scenario, side=side)
    if scenario is not None:
        m["scenario"] = scenario
    if calls is not None:
        m["calls"] = [list(c) for c in calls]
        m["call_of_step"] = list(range(len(calls) - T, len(calls)))
    m.update(extra)
    save_file({"logits": z}, str(path), metadata={"kvconf.trace": json.dumps(m)})
    return path


def cache_calls(on):
    n = len(PROMPT)
    if on:
        return [(n, 0)] + [(1, n + t - 1) for t in range(1, T)]
    return [(n + t, 0) for t in range(T)]


def rules(r):
    return {x.rule: x for x in r.results}


def test_cache_pair_with_calls_proves_its_path(tmp_path):
    on = write_trace(tmp_path / "a.on", "cache_on", {"name": "cache"}, calls=cache_calls(True))
    off = write_trace(tmp_path / "a.off", "cache_off", {"name": "cache"}, calls=cache_calls(False))
    r = kvconf.check_traces(on, off, out=tmp_path / "out")
    assert r.passed and rules(r)["scenario_path"].passed, r.results


def test_an_adapter_whose_cache_on_side_recomputes_is_caught(tmp_path):
    """Both traces agree bit for bit (the 'cache-ON' side recomputed everything), so every logit rule passes; the
    calls it reported do not match cache-ON's, and scenario_path fails naming the first wrong call."""
    on = write_trace(tmp_path / "a.on", "cache_on", {"name": "cache"}, calls=cache_calls(False))
    off = write_trace(tmp_path / "a.off", "cache_off", {"name": "cache"}, calls=cache_calls(False))
    r = kvconf.check_traces(on, off, out=tmp_path / "out")
    path = rules(r)["scenario_path"]
    assert not path.passed and not r.passed
    assert "a.on (side A of cache) call 1 (step 1): calls[1] fed 5 (expected 1), calls[1] cached 0 (expected 4)" \
        in path.detail
    assert all(x.passed for x in r.results if x.rule != "scenario_path")


def test_restore_is_bitwise_and_refill_shares_its_first_steps(tmp_path):
    import numpy as np
    z = np.random.default_rng(3).normal(size=(T, V)).astype(np.float16)
    z2 = z.copy()
    z2[4, 7] = np.nextafter(z2[4, 7], np.float16(-np.inf))  # one ulp, after the event, not the chosen token
    sc = {"name": "restore", "at_step": 2}
    same = kvconf.check_traces(write_trace(tmp_path / "r.a", "scenario", sc, z),
                               write_trace(tmp_path / "r.b", "reference", sc, z), out=tmp_path / "o1")
    assert same.passed and rules(same)["scenario_bitwise"].passed
    moved = kvconf.check_traces(write_trace(tmp_path / "r2.a", "scenario", sc, z2),
                                write_trace(tmp_path / "r2.b", "reference", sc, z), out=tmp_path / "o2")
    assert not rules(moved)["scenario_bitwise"].passed and rules(moved)["scenario_shared_steps_bitwise"].passed
    assert moved.records[0]["profile"] == "fp16-synthetic-eager+restore2"
    sc = {"name": "refill", "at_step": 3}
    early = z.copy()
    early[1, 7] = np.nextafter(early[1, 7], np.float16(-np.inf))  # before the event: must not differ
    r = kvconf.check_traces(write_trace(tmp_path / "f.a", "scenario", sc, early),
                            write_trace(tmp_path / "f.b", "reference", sc, z), out=tmp_path / "o3")
    assert not rules(r)["scenario_shared_steps_bitwise"].passed
    assert "scenario_bitwise" not in rules(r)  # refill is judged by the near-tie rules after the event


def test_expect_bitwise(tmp_path):
    import numpy as np
    z = np.random.default_rng(4).normal(size=(T, V)).astype(np.float16)
    z2 = z.copy()
    z2[3, 2] = np.nextafter(z2[3, 2], np.float16(-np.inf))
    on = write_trace(tmp_path / "e.on", "cache_on", logits=z2, fmt="kvconf.trace/1")
    off = write_trace(tmp_path / "e.off", "cache_off", logits=z, fmt="kvconf.trace/1")
    assert kvconf.check_traces(on, off, out=tmp_path / "o1").passed  # a rounding-sized difference, no flip
    r = kvconf.check_traces(on, off, out=tmp_path / "o2", expect_bitwise=True)
    assert not r.passed and "(--expect-bitwise)" in rules(r)["scenario_bitwise"].detail
    exe = os.environ.get("KVCONF_EXE")
    if exe:
        p = subprocess.run([exe, "check", "--on", str(on), "--off", str(off), "--out", str(tmp_path / "cli"),
                            "--expect-bitwise"], capture_output=True, text=True, timeout=300)
        assert p.returncode == 1, p.stdout + p.stderr


@pytest.mark.parametrize("kw, message", [
    ({"fmt": "kvconf.trace/1", "scenario": {"name": "cache"}}, "field 'scenario': needs format 'kvconf.trace/1.1'"),
    ({"scenario": {"name": "hot"}}, "field 'scenario.name': 'hot', expected cache, prefix"),
    ({"scenario": {"name": "chunked"}}, "field 'scenario.chunk': required for the chunked scenario"),
    ({"scenario": {"name": "prefix", "shared": 9}}, "field 'scenario.shared': required for prefix, from 1 to"),
    ({"scenario": {"name": "restore", "at_step": 6}}, "field 'scenario.at_step': required for restore"),
    ({"calls": [(4, 0)] + [(1, 4)] * 5, "call_of_step": [0, 1, 2, 3, 4, 9]},
     "field 'call_of_step\\[5\\]': expected an index into calls, increasing"),
    ({"calls": [(4, 0)], "call_of_step": [0]}, "field 'call_of_step': expected 6 call indices"),
])
def test_bad_scenario_fields_are_named(tmp_path, kw, message):
    side = "scenario" if kw.get("scenario", {}).get("name", "cache") != "cache" else "cache_on"
    scenario = kw.pop("scenario", None)
    bad = write_trace(tmp_path / "bad", side, scenario, **kw)
    good = write_trace(tmp_path / "good", "cache_off", fmt="kvconf.trace/1")
    with pytest.raises(ValueError, match=message):
        kvconf.check_traces(bad, good, out=tmp_path / "o")


def test_sides_must_pair(tmp_path):
    sc = {"name": "chunked", "chunk": 2}
    a = write_trace(tmp_path / "a", "scenario", sc)
    with pytest.raises(ValueError, match="scenario.side.*reference, but given as --on"):
        kvconf.check_traces(write_trace(tmp_path / "b", "reference", sc), a, out=tmp_path / "o")
    with pytest.raises(ValueError, match="not a pair: scenario chunked vs cache"):
        kvconf.check_traces(a, write_trace(tmp_path / "c", "cache_off", fmt="kvconf.trace/1"), out=tmp_path / "o2")
