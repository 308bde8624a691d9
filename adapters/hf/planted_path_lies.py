# Planted path lies on the transformers side (docs/TRACES.md "The engine's report"): kvconf_hf_trace.py with one
# realistic bug that leaves every logit rule passing, which only the engine's own report of its calls exposes:
#   recompute_on  the cache-ON path's decode step feeds the whole sequence with no cache (one changed line in
#                 decode_forward): its logits are cache-OFF's, and a record kept from the adapter's own variables
#                 would still say [1, n + t - 1]
#   batch_alone   the batch scenario's "batched" side gives the model only its own row (a slicing bug), while the
#                 adapter's bookkeeping still holds the whole batch
# Usage: planted_path_lies.py FAULT <kvconf_hf_trace.py options>
"""Usage: planted_path_lies.py recompute_on|batch_alone <adapter options>"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hf_scenarios  # noqa: E402
import kvconf_hf_trace as hf  # noqa: E402


def recompute_decode(model: Any, seq: list[int], past: Any, **kwargs: Any) -> Any:
    """Step t > 0 of cache ON done as a recompute: the whole sequence, no cache given (a fresh one comes back)."""
    import torch
    return model(input_ids=torch.tensor([seq], dtype=torch.long), use_cache=True, **kwargs)


class BatchAlone(hf_scenarios.Hooks):
    def batch_rows(self, rows: int) -> int:
        return 1


def main(argv: list[str]) -> int:
    """argv: FAULT then kvconf_hf_trace.py's options; the fault is planted for this run only (the test calls it
    in-process)."""
    faults: dict[str, Callable[[], Callable[[], None]]] = {"recompute_on": _plant_recompute,
                                                           "batch_alone": _plant_batch_alone}
    if not argv or argv[0] not in faults:
        print(f"planted_path_lies: the first argument must be one of {', '.join(faults)}", file=sys.stderr)
        return 2
    restore = faults[argv[0]]()
    try:
        return hf.main(argv[1:])
    finally:
        restore()


def _plant_recompute() -> Callable[[], None]:
    honest = hf.decode_forward
    hf.decode_forward = recompute_decode

    def restore() -> None:
        hf.decode_forward = honest
    return restore


def _plant_batch_alone() -> Callable[[], None]:
    honest = hf_scenarios.HOOKS
    hf_scenarios.HOOKS = BatchAlone()

    def restore() -> None:
        hf_scenarios.HOOKS = honest
    return restore


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
