"""kvconf.check_traces: `kvconf check` on one cache-ON and one cache-OFF trace file (kvconf.trace/1, docs/TRACES.md),
judged by kvconf model's rules; records are written to out/pairs.jsonl (resumable) and returned."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Union

from . import _core
from ._results import Result

# A file or folder name: a str or a path object (pathlib.Path, os.PathLike).
PathArg = Union[str, "os.PathLike[str]"]


class TraceCheck:
    """What check_traces found: the pairs' records, their rules as Results, and the results folder."""

    def __init__(self, records: list[dict[str, Any]], out: str) -> None:
        self.records = records  # the RunPairRecord JSON of each pair (kvconf.run_pair schema)
        self.out = out
        self.results = [Result(r["rule"], bool(r["pass"]), _num(r["error"]), _num(r["bound"]), _num(r["headroom"]),
                               int(r.get("seed", 0)), rec.get("prompt_id", ""), rec.get("profile", ""),
                               r.get("detail", ""), _opt(r.get("reference_error")), r.get("worst_index"),
                               _opt(r.get("worst_value")), _opt(r.get("worst_expected")), r.get("paths", ""))
                        for rec in records for r in rec.get("rules", [])]

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(r.passed for r in self.results)

    def __repr__(self) -> str:
        return (f"TraceCheck(pairs={len(self.records)}, rules={len(self.results)}, passed={self.passed}, "
                f"out={self.out!r})")


def _num(v: float | str) -> float:
    return float(v)  # a number, or "inf", "-inf", "nan" (JSON has no infinities; records.hpp json_number)


def _opt(v: float | str | None) -> float | None:
    return None if v is None else _num(v)


def check_traces(on: PathArg, off: PathArg, model: PathArg | None = None, *, out: PathArg | None = None,
                 resume: bool = False, expect_bitwise: bool = False) -> TraceCheck:
    """Checks the pair (on: the cache-ON trace or a scenario's "scenario" side, off: the cache-OFF trace or the
    "reference" side; docs/SCENARIOS.md). model: the checkpoint for kvconf's fp32 replay (FlipsAreNearTies'
    reference), or None. out: the results folder (default: a new temporary one). expect_bitwise: the engine claims
    determinism, every step must be bitwise equal (`kvconf check --expect-bitwise`). ValueError names the file and
    field of a bad trace."""
    for name, p in (("on", on), ("off", off)):
        if not Path(p).is_file():
            raise FileNotFoundError(f"{name}={str(Path(p))!r}: no such trace file")
    folder = str(Path(out)) if out is not None else tempfile.mkdtemp(prefix="kvconf-check-")
    recs = _core.check_traces(str(Path(on)), str(Path(off)), str(Path(model)) if model else "", folder, bool(resume),
                              bool(expect_bitwise))
    return TraceCheck([json.loads(r) for r in recs], folder)
