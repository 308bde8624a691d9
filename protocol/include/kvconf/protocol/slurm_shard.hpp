// The shard of a run taken from a Slurm job array (SLURM_ARRAY_TASK_ID / _COUNT / _MIN / _STEP) when --shard is not
// given: `kvconf model` in an `sbatch --array=0-15` script needs no --shard (docs/SLURM.md).
#pragma once

#include <functional>
#include <string>

#include "kvconf/protocol/result_store.hpp"

namespace kvconf::protocol {

// Reads an environment variable: nullptr when unset (std::getenv fits; tests pass a map).
using EnvLookup = std::function<const char*(const char*)>;

struct ShardChoice {
  Shard shard;         // 0/1 when neither --shard nor a Slurm array says otherwise
  std::string source;  // where it came from, for the log line: "--shard", "SLURM_ARRAY_TASK_ID=4 ..." or "" (default)
};

// --shard (`flag_given`, `flag` "I/N") wins. Otherwise, when SLURM_ARRAY_TASK_ID or SLURM_ARRAY_TASK_COUNT is set, the
// shard is I/N with N = SLURM_ARRAY_TASK_COUNT and I = (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) /
// SLURM_ARRAY_TASK_STEP (MIN 0 and STEP 1 when unset), so `--array=1-8` and `--array=0-14:2` number their tasks 0..N-1
// too. Throws BadInput naming the variable, its value and the expected form when one is set without the other, is not a
// decimal integer, or the task does not fall on 0 <= I < N.
ShardChoice choose_shard(const std::string& flag, bool flag_given, const EnvLookup& env);

}  // namespace kvconf::protocol
