// The resumable kernel sweep (kernel_sweep.hpp).
#include "kvconf/protocol/kernel_sweep.hpp"

#include <utility>

#include "kvconf/protocol/bad_input.hpp"
#include "kvconf/protocol/results_dir.hpp"

namespace kvconf::protocol {

namespace {
std::string kernel_record_key(const nlohmann::json& record) { return results::kernel_case_from_json(record).key(); }
}  // namespace

JsonlStore open_kernel_store(const std::filesystem::path& file, bool resume) {
  return JsonlStore(file, resume, kernel_record_key);
}

std::size_t run_kernel_sweep(const kernels::Registry& reg, const conformance::SweepOptions& so,
                             const std::vector<const conformance::SweepItem*>& items, JsonlStore& store,
                             const std::function<void(results::KernelCaseRecord&&)>& on_new) {
  std::size_t ran = 0;
  for (const conformance::SweepItem* item : items) {
    if (store.has(item->key())) continue;
    results::KernelCaseRecord r = conformance::run_sweep_item(reg, *item, so);
    store.append(results::to_json(r));
    ++ran;
    if (on_new) on_new(std::move(r));
  }
  return ran;
}

std::vector<results::KernelCaseRecord> open_kernel_sweep(const std::filesystem::path& out,
                                                         const nlohmann::json& manifest, bool resume,
                                                         const std::set<std::string>& planned,
                                                         std::optional<JsonlStore>& store) {
  ensure_out_dir(out);
  const auto manifest_file = out / "manifest.json";
  nlohmann::json file = read_manifest(manifest_file);
  if (resume && file.contains("kernels")) {
    nlohmann::json before = file["kernels"], now = manifest;
    before.erase("kvconf_version");
    now.erase("kvconf_version");
    if (before != now)
      throw BadInput("--resume: " + manifest_file.string() + " records a different sweep (" + file["kernels"].dump() +
                     "); rerun with the same --filter/--quick/--seed/--shard or choose another --out");
  }
  store.emplace(out / "kernels.jsonl", resume, kernel_record_key);
  std::vector<results::KernelCaseRecord> finished;
  for (const nlohmann::json& j : store->records()) {
    results::KernelCaseRecord r = results::kernel_case_from_json(j);
    if (!planned.count(r.key()))
      throw BadInput("--resume: " + store->file().string() + " holds '" + r.key() +
                     "', which is not in this sweep (other --filter/--quick/--shard?); choose another --out");
    finished.push_back(std::move(r));
  }
  file["kernels"] = manifest;
  write_manifest_file(manifest_file, file);
  return finished;
}

}  // namespace kvconf::protocol
