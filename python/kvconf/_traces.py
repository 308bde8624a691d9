"""kvconf.check_traces: `kvconf check` on one cache-ON and one cache-OFF trace file (kvconf.trace/1, docs/TRACES.md),
judged by kvconf model's rules; records are written to out/pairs.jsonl (resumable) and returned."""

from __future__ import annotations

import json
import os
import tempfile

from . import _core
from ._results import Result


class TraceCheck:
    def __init__(self, records, out):
        self.records = records  # the RunPairRecord JSON of each pair (kvconf.run_pair schema)
        self.out = out
        self.results = [Result(r["rule"], bool(r["pass"]), _num(r["error"]), _num(r["bound"]), _num(r["headroom"]),
                               int(r.get("seed", 0)), rec.get("prompt_id", ""), rec.get("profile", ""),
                               r.get("detail", ""))
                        for rec in records for r in rec.get("rules", [])]

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(r.passed for r in self.results)

    def __repr__(self):
        return f"TraceCheck(pairs={len(self.records)}, rules={len(self.results)}, passed={self.passed}, out={self.out!r})"


def _num(v):
    return float(v)  # a number, or "inf", "-inf", "nan" (JSON has no infinities; records.hpp json_number)


def check_traces(on, off, model=None, *, out=None, resume=False, expect_bitwise=False):
    """Checks the pair (on: the cache-ON trace or a scenario's "scenario" side, off: the cache-OFF trace or the
    "reference" side; docs/SCENARIOS.md). model: the checkpoint for kvconf's fp32 replay (FlipsAreNearTies'
    reference), or None. out: the results folder (default: a new temporary one). expect_bitwise: the engine claims
    determinism, every step must be bitwise equal (`kvconf check --expect-bitwise`). ValueError names the file and
    field of a bad trace."""
    for name, p in (("on", on), ("off", off)):
        if not os.path.isfile(os.fspath(p)):
            raise FileNotFoundError(f"{name}={os.fspath(p)!r}: no such trace file")
    out = os.fspath(out) if out is not None else tempfile.mkdtemp(prefix="kvconf-check-")
    recs = _core.check_traces(os.fspath(on), os.fspath(off), os.fspath(model) if model else "", out, bool(resume),
                              bool(expect_bitwise))
    return TraceCheck([json.loads(r) for r in recs], out)
