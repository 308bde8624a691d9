"""The checks on Python kernels: kvconf's case tables and the conformance rules of the suites (run in C++ by
kvconf._core, on the same cases and seeds as the Plugin/ and Torch/ suites), returned as Reports."""

from __future__ import annotations

from typing import Any, Callable, Iterable, TypeVar

from . import _core
from ._compat import set_alias
from ._kernel import AttentionKernel, GemmKernel, NormKernel, _Kernel
from ._results import Case, Report, Result

C = TypeVar("C", _core.AttentionCase, _core.GemmCase, _core.ProjectionCase, _core.NormCase)

SETS = ("quick", "default", "full")
# conformance/kernel_rules.hpp's attention table, the one list the suites and the kernel sweep run too.
ATTENTION_RULES = tuple(_core.attention_rules())


def _set(case_set: str) -> str:
    if case_set not in SETS:
        raise ValueError(f"case_set={case_set!r}: expected one of {', '.join(SETS)}")
    return case_set


@set_alias
def attention_cases(case_set: str = "quick") -> list[_core.AttentionCase]:
    """quick: 10 small cases that exercise every property of the full table (case.properties; the pytest plugin's
    default); default: the suites' fast cases (what Plugin/ and Torch/ run in ctest); full: the suites' tables with
    the slow cases."""
    return _core.attention_cases(_set(case_set))


@set_alias
def gemm_cases(case_set: str = "quick") -> list[_core.GemmCase]:
    """GEMM cases (the default set has M = 1 with the K tails 11008, 2304 and 14336)."""
    return _core.gemm_cases(_set(case_set))


@set_alias
def projection_cases(case_set: str = "quick") -> list[_core.ProjectionCase]:
    """The K/V projection of the last token alone (decode, M = 1) vs inside the prefix GEMMs (cache off)."""
    return _core.projection_cases(_set(case_set))


@set_alias
def norm_cases(case_set: str = "quick") -> list[_core.NormCase]:
    return _core.norm_cases(_set(case_set))


def _find(kind: str, cases_of: Callable[[str], list[C]], case_id: str) -> C:
    for c in cases_of("full") + cases_of("quick"):
        if c.id == case_id:
            return c
    raise KeyError(f"no {kind} case {case_id!r} in kvconf's tables")


def attention_case(case_id: str) -> _core.AttentionCase:
    """The attention case with this id (any set); KeyError if none."""
    return _find("attention", _core.attention_cases, case_id)


def gemm_case(case_id: str) -> _core.GemmCase:
    return _find("gemm", _core.gemm_cases, case_id)


def projection_case(case_id: str) -> _core.ProjectionCase:
    return _find("projection", _core.projection_cases, case_id)


def norm_case(case_id: str) -> _core.NormCase:
    return _find("norm", _core.norm_cases, case_id)


def _seed(seed: object) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise ValueError(f"seed={seed!r}: expected None or an int from 0 to 2**64 - 1")
    return seed


def _expect(kernel: object, cls: type[_Kernel], fn_name: str) -> None:
    if not isinstance(kernel, cls):
        raise TypeError(f"{fn_name}: kernel={kernel!r}: expected a kvconf.{cls.__name__}")


def _run(kernel: _Kernel, case: Case, call: Any, run: Callable[[], list[_core.CheckResult]], reproduce: str,
         declined: Callable[[], str | None] | None = None) -> Report:
    kernel.case_id = case.id  # named by every message, the supports' and copies' included
    try:
        why = kernel._supports(call) if call is not None else kernel._device_reason()
        if why is None and declined is not None:
            why = declined()
        if why is not None:
            return Report(kernel, case, skipped=why, reproduce=reproduce)
        raw = run()
    finally:
        kernel.case_id = ""
    return Report(kernel, case, [Result(r.rule, r.passed, r.error, r.bound, r.headroom, r.seed, case.id, kernel.name,
                                        r.detail, r.reference_error, r.worst_index, r.worst_value, r.worst_expected,
                                        r.paths) for r in raw], reproduce=reproduce)


def _reproduce(fn: str, kernel: _Kernel, finder: str, case: Case, seed: int | None) -> str:
    s = f", seed={seed}" if seed is not None else ""
    return f"kvconf.{fn}(<{kernel.user_name} kernel>, kvconf.{finder}({case.id!r}){s})"


def check_attention(kernel: AttentionKernel, case: _core.AttentionCase, *, rules: Iterable[str] | None = None,
                    seed: int | None = None) -> Report:
    """Every attention rule of the suites on one case: oracle (oracle_bound, two_sided), on_off (decode vs the last
    prefill row), chunked (chunks of 1, 4, 16 rows vs one shot), unused_slots (NaN in rows [n_kv, capacity) never
    reaches the output), capacity (kernels claiming cache_invariant), batch (kernels with a batch_fn: the last row
    decoded alone vs inside batched launches of 4 and 64 sequences). rules: a subset of those names. seed: one seed
    for every rule (default: each rule's own, as the suites use; KVCONF_SEED overrides those)."""
    _expect(kernel, AttentionKernel, "check_attention")
    rules = list(rules) if rules is not None else []
    for r in rules:
        if r not in ATTENTION_RULES:
            raise ValueError(f"rules: unknown rule {r!r}, expected some of {', '.join(ATTENTION_RULES)}")
    if "batch" in rules and kernel.batch_fn is None:
        raise ValueError(f"rules: 'batch' needs a kernel with a batched launch (AttentionKernel(batch_fn=...)); "
                         f"{kernel.name} has none")
    seed = _seed(seed)
    # The batch rule alone on a case whose batched launches the kernel declines: skipped with the reason, as the suites.
    declined = (lambda: _core.attention_batch_unchecked(kernel._core, case)) if rules == ["batch"] else None
    return _run(kernel, case, case.call, lambda: _core.check_attention(kernel._core, case, rules, seed),
                _reproduce("check_attention", kernel, "attention_case", case, seed), declined)


def check_gemm(kernel: GemmKernel, case: _core.GemmCase, *, seed: int | None = None) -> Report:
    """oracle_bound and two_sided of one GEMM case (y = x·wᵀ), and for M >= 2 batch_bound (batch_bitwise for a
    kernel claiming cache_invariant): every row of the M-row call against the same row computed alone."""
    _expect(kernel, GemmKernel, "check_gemm")
    seed = _seed(seed)
    return _run(kernel, case, case.shape, lambda: _core.check_gemm(kernel._core, case, [], seed),
                _reproduce("check_gemm", kernel, "gemm_case", case, seed))


def check_projection(kernel: GemmKernel, case: _core.ProjectionCase, *, seed: int | None = None) -> Report:
    """on_off of one projection case: the last token's row computed alone (M = 1) vs inside the prefix GEMMs."""
    _expect(kernel, GemmKernel, "check_projection")
    seed = _seed(seed)
    return _run(kernel, case, None, lambda: _core.check_projection(kernel._core, case, [], seed),
                _reproduce("check_projection", kernel, "projection_case", case, seed))


def check_norm(kernel: NormKernel, case: _core.NormCase, *, seed: int | None = None) -> Report:
    """oracle_bound and two_sided of one RMSNorm case."""
    _expect(kernel, NormKernel, "check_norm")
    seed = _seed(seed)
    return _run(kernel, case, case.shape, lambda: _core.check_norm(kernel._core, case, [], seed),
                _reproduce("check_norm", kernel, "norm_case", case, seed))


def check(kernel: AttentionKernel | GemmKernel | NormKernel, case: Case, *, seed: int | None = None) -> Report:
    """The rules for this kernel's kind and this case's kind."""
    k: Any = kernel  # a kernel of another kind than the case's: the check_* function's TypeError names it
    if isinstance(case, _core.AttentionCase):
        return check_attention(k, case, seed=seed)
    if isinstance(case, _core.GemmCase):
        return check_gemm(k, case, seed=seed)
    if isinstance(case, _core.ProjectionCase):
        return check_projection(k, case, seed=seed)
    if isinstance(case, _core.NormCase):
        return check_norm(k, case, seed=seed)
    raise TypeError(f"case={case!r}: expected a kvconf case (attention_cases(), gemm_cases(), ...)")
