// The kernel sweep into a resumable DIR/kernels.jsonl (kvconf kernels, kvconf run): one record key and one loop.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <vector>

#include "kvconf/conformance/records.hpp"
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
                             const std::function<void(conformance::KernelCaseRecord&&)>& on_new = {});

}  // namespace kvconf::protocol
