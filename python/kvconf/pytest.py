"""Parametrising pytest tests over kvconf's cases (the plugin, kvconf.pytest_plugin, does the rest):

    import kvconf, kvconf.pytest

    @kvconf.pytest.attention_cases()          # the set: --kvconf-set (default quick), or set="default"
    def test_my_attention(kvconf_case, kvconf_verify):
        kvconf_verify(MY_KERNEL, kvconf_case)  # runs the rules, records error/bound/headroom, asserts

Each decorator parametrises the test's `kvconf_case` argument with the cases of its kind, ids = the case ids."""

import pytest as _pytest

_KINDS = ("attention", "gemm", "projection", "norm")


def _cases(kind, set):
    if set is not None and set not in ("quick", "default", "full"):
        raise ValueError(f"set={set!r}: expected None (--kvconf-set), 'quick', 'default' or 'full'")
    return _pytest.mark.kvconf_cases(kind=kind, set=set)


def attention_cases(set=None):
    return _cases("attention", set)


def gemm_cases(set=None):
    return _cases("gemm", set)


def projection_cases(set=None):
    return _cases("projection", set)


def norm_cases(set=None):
    return _cases("norm", set)
