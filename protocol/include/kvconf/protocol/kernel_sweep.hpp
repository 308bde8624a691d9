// The kernel sweep into a resumable DIR/kernels.jsonl (kvconf kernels, kvconf run): one record key, one loop, and the
// sweep's folder (its manifest member and the finished records checked on --resume).
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kvconf/results/records.hpp"
#include "kvconf/conformance/sweep.hpp"
#include "kvconf/protocol/result_store.hpp"

namespace kvconf::protocol {

// A JsonlStore of kernel-case records at `file` (resume: keep what is there), keyed by KernelCaseRecord::key()
// ("kernel|case_id"); a stored record that does not parse throws naming the field.
JsonlStore open_kernel_store(const std::filesystem::path& file, bool resume);

// Runs every item `store` does not hold yet, in order, appending each record as it finishes (so an interrupted sweep
// resumes where it stopped); `on_new` sees each new record. Returns how many items ran.
std::size_t run_kernel_sweep(const kernels::Registry& reg, const conformance::SweepOptions& so,
                             const std::vector<const conformance::SweepItem*>& items, JsonlStore& store,
                             const std::function<void(results::KernelCaseRecord&&)>& on_new = {});

// Opens OUT for a kernel sweep (kvconf kernels): creates OUT (BadInput if it cannot, or cannot write there); on
// resume, OUT/manifest.json's member "kernels" must equal `manifest` apart from kvconf_version (BadInput naming both
// otherwise); emplaces `store` at OUT/kernels.jsonl; reads its finished records once, each of which must be a key of
// `planned` (BadInput naming the key); then writes `manifest` as the member "kernels" (the file's other members,
// such as kvconf model's, are kept). Returns the finished records, in file order.
std::vector<results::KernelCaseRecord> open_kernel_sweep(const std::filesystem::path& out,
                                                         const nlohmann::json& manifest, bool resume,
                                                         const std::set<std::string>& planned,
                                                         std::optional<JsonlStore>& store);

}  // namespace kvconf::protocol
