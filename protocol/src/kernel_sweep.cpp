// The resumable kernel sweep (kernel_sweep.hpp).
#include "kvconf/protocol/kernel_sweep.hpp"

#include <utility>

namespace kvconf::protocol {

JsonlStore open_kernel_store(const std::filesystem::path& file, bool resume) {
  return JsonlStore(file, resume,
                    [](const nlohmann::json& record) { return conformance::kernel_case_from_json(record).key(); });
}

std::size_t run_kernel_sweep(const kernels::Registry& reg, const conformance::SweepOptions& so,
                             const std::vector<const conformance::SweepItem*>& items, JsonlStore& store,
                             const std::function<void(conformance::KernelCaseRecord&&)>& on_new) {
  std::size_t ran = 0;
  for (const conformance::SweepItem* item : items) {
    if (store.has(item->key())) continue;
    conformance::KernelCaseRecord r = conformance::run_sweep_item(reg, *item, so);
    store.append(conformance::to_json(r));
    ++ran;
    if (on_new) on_new(std::move(r));
  }
  return ran;
}

}  // namespace kvconf::protocol
