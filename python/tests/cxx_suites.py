"""The C++ conformance suites as a reference for the Python path: runs one of them (KVCONF_SUITES_DIR, set by CTest)
with --gtest_output=xml and compares the error and bound it recorded (17 significant digits) with a Python Report's,
bit for bit. Used by test_parity (Torch/, libtorch on the CPU) and test_cuda (TorchCuda/, PyTorch's CUDA kernels)."""
import fnmatch
import os
import re
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

SUITES = os.environ.get("KVCONF_SUITES_DIR")


def sanitize(s):
    """A kernel name or case id as GoogleTest's parameter names spell it."""
    return re.sub(r"[^A-Za-z0-9]", "_", s)


def gtest_filters(prefix, kernel, case_ids, *suites):
    """The GoogleTest names of `kernel`'s cases `case_ids` in each of `suites` (prefix "Torch" or "TorchCuda"): the
    filters a test asks of one suite program together (run_suite's `together`)."""
    return tuple(f"{prefix}/{s}.*/{kernel}__{sanitize(c)}" for s in suites for c in case_ids)


class CxxResults:
    """What the C++ suite recorded for one kernel and case: `values` maps "<rule>.error"/"<rule>.bound" to floats,
    `known_findings` the rules a known finding (conformance/suites/known_findings.hpp) expects to fail."""

    def __init__(self, values, known_findings, ran):
        self.values = values
        self.known_findings = known_findings
        self.ran = ran  # GoogleTest cases that ran (0: the kernel declined the case, as its supports said)


_RUNS = {}  # (exe, filters) -> [(full test name, skipped, {property: value})]: one process per filter set


def _run(exe, filters):
    """Runs `exe` once for the GoogleTest filters asked together and keeps what each test case recorded."""
    key = (exe, filters)
    if key not in _RUNS:
        with tempfile.TemporaryDirectory() as tmp:
            xml = Path(tmp) / "out.xml"
            subprocess.run([os.path.join(SUITES, exe), f"--gtest_filter={':'.join(filters)}-*Seeds*",
                            f"--gtest_output=xml:{xml}"], check=True, capture_output=True, timeout=600)
            cases = []
            for tc in ET.parse(xml).getroot().iter("testcase"):
                skipped = tc.get("result") == "skipped" or tc.find("skipped") is not None
                props = {p.get("name"): p.get("value") for p in tc.iter("property")}
                props.update({k: v for k, v in tc.attrib.items() if re.search(r"\.(error|bound)$", k)})
                cases.append((f"{tc.get('classname')}.{tc.get('name')}", skipped, props))
        _RUNS[key] = cases
    return _RUNS[key]


def run_suite(exe, test_filter, together=()):
    """What the C++ program `exe` recorded for the test cases `test_filter` selects (a GoogleTest pattern). `together`
    names the filters later calls will ask of the same program: one process runs them all (a suite program takes
    seconds to load libtorch and CUDA) and later calls read its results."""
    filters = tuple(sorted({test_filter, *together}))
    values, known, ran = {}, set(), 0
    for name, skipped, props in _run(exe, filters):
        if skipped or not fnmatch.fnmatchcase(name, test_filter):
            continue  # skipped: CapacityInvariant, only for kernels claiming cache_invariant, as in check_attention
        ran += 1
        for key, value in props.items():
            if key.endswith(".known_finding"):
                known.add(key[:-len(".known_finding")])
            elif key.endswith((".error", ".bound")):
                values[key] = float(value)
    assert ran == 0 or values, f"{exe} {test_filter}: cases ran but recorded no error or bound"
    return CxxResults(values, known, ran)


def compare(report, cxx):
    """Every error and bound the C++ suite recorded equals the Python result's, bit for bit; a rule passes in Python
    exactly where it passed in C++ (a known finding's rule fails in both: C++ records it as expected); a case the
    kernel declines is declined on both sides."""
    if report.skipped:
        assert cxx.ran == 0, f"Python skipped ({report.skipped}) where C++ ran {cxx.ran} case(s)"
        return
    assert cxx.ran, f"C++ declined a case Python ran: {report.message()}"
    seen = 0
    for r in report:
        assert r.passed == (r.rule not in cxx.known_findings), f"{r} ({r.kernel} on {r.case_id}; {r.detail})"
        for what in ("error", "bound"):
            key = f"{r.rule}.{what}"
            if key in cxx.values:
                mine = getattr(r, what)
                assert mine == cxx.values[key], f"{key}: python {mine!r} vs C++ {cxx.values[key]!r}"
                seen += 1
    assert seen == len(cxx.values) and seen >= 2, (seen, sorted(cxx.values))

