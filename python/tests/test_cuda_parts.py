"""The CTest cases that together run test_cuda.py (Python/cuda_<backend>, Python/cuda_other: one per SDPA backend, so
that a GPU machine runs them side by side) select every one of its tests exactly once: read from CTest's own test list
(KVCONF_CTEST, KVCONF_BUILD_DIR), collected here with each case's -k expression. A backend added to test_cuda.py but
not to python/tests/CMakeLists.txt, or an expression that matches two parts, fails here, on a machine without a GPU."""
import json
import os
import subprocess
import sys

import pytest

CTEST = os.environ.get("KVCONF_CTEST")
BUILD = os.environ.get("KVCONF_BUILD_DIR")
pytestmark = pytest.mark.skipif(not (CTEST and BUILD), reason="KVCONF_CTEST and KVCONF_BUILD_DIR (set by CTest)")


def cuda_parts():
    """{CTest name: its pytest -k expression} for the cases that run test_cuda.py."""
    shown = subprocess.run([CTEST, "--test-dir", BUILD, "--show-only=json-v1", "-R", "^Python/cuda_"], check=True,
                           capture_output=True, text=True, timeout=120)
    parts = {}
    for test in json.loads(shown.stdout)["tests"]:
        cmd = test["command"]
        if any(arg.endswith("test_cuda.py") for arg in cmd):
            assert "-k" in cmd, f"{test['name']} runs test_cuda.py without -k: {cmd}"
            parts[test["name"]] = cmd[cmd.index("-k") + 1]
    return parts


def collect(expressions):
    """{expression: the node ids `pytest --collect-only -k expression` lists} (None: no -k), one process each, side by
    side (each imports torch)."""
    def start(expression):
        args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                os.path.join(os.path.dirname(__file__), "test_cuda.py")] + (["-k", expression] if expression else [])
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    running = {e: start(e) for e in expressions}
    found = {}
    for expression, proc in running.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode in (0, 5), out[-2000:] + err[-2000:]  # 5: nothing selected
        found[expression] = {line for line in out.splitlines() if "::" in line}
    return found


def test_the_cuda_parts_select_every_test_once():
    parts = cuda_parts()
    assert len(parts) >= 2, parts
    found = collect([None, *parts.values()])
    everything = found[None]
    assert len(everything) > 40, sorted(everything)
    seen = {}
    for name, expression in parts.items():
        chosen = found[expression]
        assert chosen, f"{name} (-k {expression!r}) selects no test of test_cuda.py"
        for node in chosen:
            assert node not in seen, f"{node} is run by both {seen[node]} and {name}"
            seen[node] = name
    assert set(seen) == everything, f"run by no CTest case: {sorted(everything - set(seen))}"
