# Planted scenario faults on the transformers side (docs/SCENARIOS.md): kvconf_hf_trace.py with one realistic bug in
# the scenario driver (hf_scenarios.HOOKS), as kvconf's engine plants its own (engine/faults/scenario_faults.hpp):
#   prefix_row_short     the request keeps one row fewer of the donor's cache than the shared prefix, then prefills
#                        from the shared length on (an off-by-one in the prefix length)
#   chunk_boundary_skip  the second chunk starts one token late
#   batch_padding_leaks  the batch's attention mask marks the padding as tokens (the mask dropped): a shorter request
#                        attends over the pad tokens in front of it
# Usage: planted_scenario_faults.py FAULT <kvconf_hf_trace.py options>
"""Usage: planted_scenario_faults.py prefix_row_short|chunk_boundary_skip|batch_padding_leaks <adapter options>"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hf_scenarios  # noqa: E402
import kvconf_hf_trace as hf  # noqa: E402


class PrefixRowShort(hf_scenarios.Hooks):
    def prefix_rows(self, shared: int) -> int:
        return shared - 1


class ChunkBoundarySkip(hf_scenarios.Hooks):
    def chunks(self, n: int, chunk: int) -> list[tuple[int, int]]:
        v = super().chunks(n, chunk)
        if len(v) >= 2:
            v[1] = (v[1][0] + 1, v[1][1])
            if v[1][0] == v[1][1]:
                del v[1]
        return v


class BatchPaddingLeaks(hf_scenarios.Hooks):
    def batch_mask(self, mask: list[list[int]]) -> list[list[int]]:
        return [[1] * len(row) for row in mask]


FAULTS: dict[str, type[hf_scenarios.Hooks]] = {"prefix_row_short": PrefixRowShort,
                                               "chunk_boundary_skip": ChunkBoundarySkip,
                                               "batch_padding_leaks": BatchPaddingLeaks}


def main(argv: list[str]) -> int:
    """argv: FAULT then kvconf_hf_trace.py's options; the fault is planted for this run only (the test calls it
    in-process)."""
    if len(argv) < 1 or argv[0] not in FAULTS:
        print(f"planted_scenario_faults: the first argument must be one of {', '.join(FAULTS)}", file=sys.stderr)
        return 2
    hooks = hf_scenarios.HOOKS
    hf_scenarios.HOOKS = FAULTS[argv[0]]()
    try:
        return hf.main(argv[1:])
    finally:
        hf_scenarios.HOOKS = hooks


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
