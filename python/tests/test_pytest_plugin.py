"""The pytest plugin, run as a user runs it (a pytest subprocess on a small test file): the decorator parametrises
over the chosen set with the case ids, --kvconf-seed reaches every rule, --junitxml carries each rule's error, bound,
headroom and seed, a kernel's declined case is a skip with its reason, and a failing kernel fails with kvconf's
message."""
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import kvconf
from buggy_attention import BLOCK

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
TEST = textwrap.dedent('''
    import torch, kvconf, kvconf.pytest
    from sdpa_attention import sdpa_attention, no_softcap
    from buggy_attention import buggy_attention
    GOOD = kvconf.AttentionKernel(sdpa_attention, dtype=torch.float16, exp_error_ulps=20, supports=no_softcap)
    BAD = kvconf.AttentionKernel(buggy_attention, dtype=torch.float16)

    @kvconf.pytest.attention_cases()
    def test_good(kvconf_case, kvconf_verify):
        kvconf_verify(GOOD, kvconf_case)

    @kvconf.pytest.attention_cases(case_set="quick")
    def test_bad(kvconf_case, kvconf_verify):
        kvconf_verify(BAD, kvconf_case, rules=["on_off"])
''')


def run_pytest(tmp_path, *args):
    (tmp_path / "test_user.py").write_text(TEST)
    xml = tmp_path / "junit.xml"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(kvconf.__file__)), EXAMPLES, env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "pytest", "-p", "kvconf.pytest_plugin", "-q", "-p", "no:cacheprovider",
           f"--junitxml={xml}", str(tmp_path / "test_user.py"), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    return p, ET.parse(xml).getroot()


def test_plugin_parametrises_records_skips_and_fails(tmp_path):
    p, root = run_pytest(tmp_path, "-k", "test_good or test_bad", "--kvconf-seed", "12345")
    assert p.returncode == 1, p.stdout + p.stderr  # the bad kernel fails
    cases = {c.get("name"): c for c in root.iter("testcase")}
    quick = [c.id for c in kvconf.attention_cases("quick")]
    assert sorted(cases) == sorted([f"test_good[{i}]" for i in quick] + [f"test_bad[{i}]" for i in quick])
    softcap = [c.id for c in kvconf.attention_cases("quick") if c.call.softcap > 0]
    for name, c in cases.items():
        props = {q.get("name"): q.get("value") for q in c.iter("property")}
        case_id = name[name.index("[") + 1:-1]
        if name.startswith("test_good") and case_id in softcap:
            assert "no logit softcap" in c.find("skipped").get("message")
            continue
        assert props["kvconf.case"] == case_id
        assert props["on_off_bound.seed"] == "12345"
        assert float(props["on_off_bound.bound"]) > 0 and "on_off_bound.headroom" in props
        if name.startswith("test_good"):
            assert c.find("failure") is None and "oracle_bound.error" in props
        elif kvconf.attention_case(case_id).call.n_kv <= BLOCK:  # one block of keys: the buggy decode is right
            assert c.find("failure") is None
        else:
            msg = c.find("failure").get("message")
            assert "on_off_bound FAILED" in msg and "seed 12345" in msg


def test_set_option_and_bad_seed(tmp_path):
    p, _ = run_pytest(tmp_path, "-k", "test_good", "--kvconf-set", "default", "--collect-only")
    n = len(kvconf.attention_cases("default"))
    assert p.returncode == 0 and f"{n}/{len(kvconf.attention_cases('quick')) + n} tests collected" in p.stdout, \
        p.stdout  # test_good over the default set; test_bad keeps its case_set="quick"
    (tmp_path / "test_user.py").write_text(TEST)
    q = subprocess.run([sys.executable, "-m", "pytest", "-p", "kvconf.pytest_plugin", "--kvconf-seed", "x",
                        str(tmp_path / "test_user.py")], capture_output=True, text=True, timeout=300)
    assert q.returncode != 0 and "--kvconf-seed='x': expected an integer" in q.stderr, q.stderr
