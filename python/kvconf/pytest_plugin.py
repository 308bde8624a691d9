"""kvconf's pytest plugin (entry point pytest11 "kvconf"): the options --kvconf-set and --kvconf-seed, the
parametrisation of tests marked by kvconf.pytest's decorators, and the fixture kvconf_verify, which runs a kernel's
rules on a case, records each rule's error, bound, headroom and seed as the test's properties (record_property's
mechanism, so --junitxml carries them as the CTest JUnit does), skips when the kernel declines the case, and fails
with the report's message."""

from __future__ import annotations

from typing import Any, Callable, Optional

import pytest

from ._results import Report

# verify(kernel, case, **options) -> Report: the fixture kvconf_verify's value.
Verify = Callable[..., Report]

# The case set a test gets without --kvconf-set: its attention cases cover every property of the full table
# (conformance/coverage.hpp; python/tests/test_default_set.py runs four decode-only bugs through it).
DEFAULT_SET = "quick"


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kvconf", "kvconf conformance checks")
    g.addoption("--kvconf-set", choices=("quick", "default", "full"), default=DEFAULT_SET,
                help=f"which of kvconf's case sets the kvconf.pytest decorators use (default: {DEFAULT_SET})")
    g.addoption("--kvconf-seed", type=_seed, default=None,
                help="one seed for every rule and case (default: each rule's own seed, as the C++ suites use)")


def _seed(text: str) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        raise pytest.UsageError(f"--kvconf-seed={text!r}: expected an integer from 0 to 2**64 - 1") from None
    if not 0 <= v < 2**64:
        raise pytest.UsageError(f"--kvconf-seed={text!r}: expected an integer from 0 to 2**64 - 1")
    return v


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers",
                            "kvconf_cases(kind, case_set=None): parametrise kvconf_case over kvconf's cases")


def pytest_report_header(config: pytest.Config) -> str:
    import kvconf
    seed = config.getoption("--kvconf-seed")
    return (f"kvconf {kvconf.__version__}: case set {config.getoption('--kvconf-set')}, "
            f"seed {'per rule (as the C++ suites)' if seed is None else seed}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    mark = metafunc.definition.get_closest_marker("kvconf_cases")
    if mark is None:
        return
    if "kvconf_case" not in metafunc.fixturenames:
        raise pytest.UsageError(f"{metafunc.function.__name__}: a kvconf.pytest decorator needs a kvconf_case argument")
    import kvconf
    kind = mark.kwargs.get("kind", "attention")
    # "set": the marker's keyword before it was case_set (a test marked by hand)
    case_set = mark.kwargs.get("case_set") or mark.kwargs.get("set") or metafunc.config.getoption("--kvconf-set")
    cases = getattr(kvconf, f"{kind}_cases")(case_set)
    metafunc.parametrize("kvconf_case", cases, ids=[c.id for c in cases])


@pytest.fixture
def kvconf_seed(request: pytest.FixtureRequest) -> Optional[int]:
    """--kvconf-seed, or None (each rule's own seed)."""
    seed: Optional[int] = request.config.getoption("--kvconf-seed")
    return seed


@pytest.fixture
def kvconf_verify(request: pytest.FixtureRequest, kvconf_seed: Optional[int]) -> Verify:
    """verify(kernel, case, **options) -> Report: the rules of the kernel's kind on the case; every rule's error,
    bound, headroom and seed recorded as properties "<rule>.error" ...; pytest.skip with the kernel's reason when it
    declines the case; a CheckFailed (AssertionError) with the report's message when a rule fails."""
    import kvconf

    def record_property(name: str, value: object) -> None:
        # What pytest's record_property fixture does, without its warning under junit_family=xunit2 (pytest's
        # default), whose XML carries these properties all the same.
        request.node.user_properties.append((name, value))

    def verify(kernel: Any, case: Any, **options: Any) -> Report:  # kvconf.check's TypeError names a mismatch
        options.setdefault("seed", kvconf_seed)
        report = kvconf.check(kernel, case, **options) if not options.get("rules") else \
            kvconf.check_attention(kernel, case, **options)
        record_property("kvconf.kernel", kernel.name)
        record_property("kvconf.case", case.id)
        for r in report:
            record_property(f"{r.rule}.error", repr(r.error))
            record_property(f"{r.rule}.bound", repr(r.bound))
            record_property(f"{r.rule}.headroom", repr(r.headroom))
            record_property(f"{r.rule}.seed", str(r.seed))
        if report.skipped is not None:
            pytest.skip(report.skipped)
        return report.assert_pass()

    return verify
