"""What a check returns: one Result per rule (rule, error, bound, headroom, seed, case id, kernel) and a Report per
kernel and case, whose failure message reads like a good assertion: the rule, the kernel's error, the bound and what
it charges, the reference's error where there is one, and how to reproduce it."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Iterable, Union

from . import _core

if TYPE_CHECKING:
    from ._kernel import _Kernel

# A case of any kind (kvconf.attention_cases(), gemm_cases(), projection_cases(), norm_cases()).
Case = Union[_core.AttentionCase, _core.GemmCase, _core.ProjectionCase, _core.NormCase]


class CheckFailed(AssertionError):
    """A kernel broke a kvconf rule (an AssertionError, so pytest shows the message as the failure)."""


@dataclasses.dataclass(frozen=True)
class Result:
    rule: str        # "oracle_bound", "two_sided", "on_off_bound", "chunked_bound.chunk4", "unused_slots", ...
    passed: bool
    error: float     # the measured quantity: max |kernel − oracle|, |on − off|, NaNs that reached the output, ...
    bound: float     # its threshold, from reference/'s bounds (0 for bitwise rules)
    headroom: float  # (bound − error) / bound; for bitwise rules 1 when equal, −inf otherwise
    seed: int
    case_id: str
    kernel: str
    detail: str      # for people: the worst element, the values on both sides, the paths each side took
    # The numbers behind `detail` as fields (None / "" where the rule has none), read from the C++ result:
    reference_error: float | None = None  # two_sided: the naive same-precision reference's own error
    worst_index: int | None = None        # flat index of the worst element of the kernel's output
    worst_value: float | None = None      # the kernel's value there
    worst_expected: float | None = None   # the oracle's (on/off rules: the cache-OFF side's) value there
    paths: str = ""                       # on/off rules: the kernel paths the two sides took, "on | off"

    def __str__(self) -> str:
        return (f"{self.rule} {'pass' if self.passed else 'FAIL'} error={self.error:.9g} bound={self.bound:.9g} "
                f"headroom={self.headroom:.4g} seed={self.seed}")


class Report(list[Result]):
    """The Results of one kernel on one case, in rule order; `skipped` is the kernel's reason when it declined."""

    def __init__(self, kernel: _Kernel, case: Case, results: Iterable[Result] = (), skipped: str | None = None,
                 reproduce: str = "") -> None:
        super().__init__(results)
        self.kernel = kernel  # the kvconf kernel object (AttentionKernel, GemmKernel, NormKernel)
        self.case_id = case.id
        self.skipped = skipped
        self.reproduce = reproduce

    @property
    def passed(self) -> bool:
        return self.skipped is None and len(self) > 0 and all(r.passed for r in self)

    @property
    def failures(self) -> list[Result]:
        return [r for r in self if not r.passed]

    def rule(self, name: str) -> Result:
        """The result of one rule ("on_off_bound", "chunked_bound.chunk1", ...); KeyError naming the rules there."""
        for r in self:
            if r.rule == name:
                return r
        raise KeyError(f"no rule {name!r} in this report: {[r.rule for r in self]}")

    def message(self) -> str:
        head = f"kvconf: {self.kernel.name} on {self.case_id}"
        if self.skipped is not None:
            return f"{head}: skipped: {self.skipped}"
        if not self:
            return f"{head}: no rule ran"
        bad = self.failures
        lines = [f"{head}: {len(bad)} of {len(self)} rules failed" if bad else f"{head}: all {len(self)} rules pass"]
        for r in bad:
            over = "exceeds" if r.error > r.bound else "vs"
            lines.append(f"  {r.rule} FAILED: error {r.error:.6g} {over} bound {r.bound:.6g} "
                         f"(headroom {r.headroom:.4g}, seed {r.seed})")
            ref = r.reference_error
            if ref is not None:
                lines.append(f"    the naive same-precision reference's error on this case: {ref:.6g}")
            if r.rule in ("oracle_bound", "on_off_bound", "capacity_bound") or r.rule.startswith("chunked_bound"):
                lines.append(f"    the bound: {self.kernel.describe_bound()}")
            lines.append(f"    {r.detail}")
        if bad and self.reproduce:
            lines.append(f"  reproduce: {self.reproduce}")
        return "\n".join(lines)

    def assert_pass(self) -> Report:
        """Raises CheckFailed with message() unless every rule passed (a skipped report raises too)."""
        if not self.passed:
            raise CheckFailed(self.message())
        return self

    def __str__(self) -> str:
        return self.message() + ("" if self.failures or self.skipped else "\n" + "\n".join(f"  {r}" for r in self))
