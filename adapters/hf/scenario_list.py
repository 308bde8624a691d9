# engine/scenarios.json, kvconf's one list of scenarios (docs/SCENARIOS.md), as the transformers adapter, its tests and
# the trace reader read it: no copy of the names here.
"""SCENARIOS: {name: row} of engine/scenarios.json in its order; NAMES: the names, "cache" first."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCENARIOS_FILE = Path(__file__).resolve().parents[2] / "engine" / "scenarios.json"


def _load() -> dict[str, dict[str, Any]]:
    with SCENARIOS_FILE.open(encoding="utf-8") as f:
        rows = json.load(f)["scenarios"]
    return {row["name"]: row for row in rows}


SCENARIOS: dict[str, dict[str, Any]] = _load()
NAMES: tuple[str, ...] = tuple(SCENARIOS)
