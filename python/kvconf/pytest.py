"""Parametrising pytest tests over kvconf's cases (the plugin, kvconf.pytest_plugin, does the rest):

    import kvconf, kvconf.pytest

    @kvconf.pytest.attention_cases()          # the set: --kvconf-set (default quick), or case_set="default"
    def test_my_attention(kvconf_case, kvconf_verify):
        kvconf_verify(MY_KERNEL, kvconf_case)  # runs the rules, records error/bound/headroom, asserts

Each decorator parametrises the test's `kvconf_case` argument with the cases of its kind, ids = the case ids."""

from __future__ import annotations

import pytest as _pytest

from ._compat import set_alias

_KINDS = ("attention", "gemm", "projection", "norm")


def _cases(kind: str, case_set: str | None) -> _pytest.MarkDecorator:
    if case_set is not None and case_set not in ("quick", "default", "full"):
        raise ValueError(f"case_set={case_set!r}: expected None (--kvconf-set), 'quick', 'default' or 'full'")
    return _pytest.mark.kvconf_cases(kind=kind, case_set=case_set)


@set_alias
def attention_cases(case_set: str | None = None) -> _pytest.MarkDecorator:
    return _cases("attention", case_set)


@set_alias
def gemm_cases(case_set: str | None = None) -> _pytest.MarkDecorator:
    return _cases("gemm", case_set)


@set_alias
def projection_cases(case_set: str | None = None) -> _pytest.MarkDecorator:
    return _cases("projection", case_set)


@set_alias
def norm_cases(case_set: str | None = None) -> _pytest.MarkDecorator:
    return _cases("norm", case_set)
