// `kvconf report`'s shard check, in the protocol because it rebuilds the protocol's plan: the merged shards hold
// every planned run pair exactly once. The folders whose
// manifest.json is a `kvconf model` run's are grouped by run (the same options but --shard), each run's whole plan is
// rebuilt from its manifest (profiles x strategies x seeds x prompts, numbered as protocol_plan.hpp does) and every
// planned pair must be in exactly one folder. The prompts are the manifest's "prompt_ids" (draw order) when it has
// them, and then each pair must be in the folder of the shard that owns it; otherwise the prompts the records name,
// which must be n of them (a prompt no folder holds any pair of is counted, not named).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace kvconf::protocol {

struct ShardCoverage {
  std::size_t runs = 0;     // `kvconf model` runs found among the folders (folders without a manifest are not checked)
  std::size_t planned = 0;  // their planned pairs, all shards together
  std::size_t missing = 0;  // planned pairs no folder holds (only with allow_missing; otherwise that throws)
  std::vector<std::string> notes;  // one line per run: its shards and pairs, or what is missing
};

// Throws protocol::BadInput naming the pair key and the folders: a pair in two folders (or twice in one), a pair
// outside its folder's plan or shard, shards of one run with different N, a malformed manifest field; and, unless
// allow_missing, a planned pair that no folder holds (naming the shard that should hold it and its folder, if any).
ShardCoverage check_shard_coverage(const std::vector<std::filesystem::path>& dirs, bool allow_missing);

}  // namespace kvconf::protocol
