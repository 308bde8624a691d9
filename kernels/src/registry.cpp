// The kernel registry: unique names across GEMM, norm and attention kernels, lookup by name.
#include "kvconf/kernels/registry.hpp"

#include <algorithm>
#include <stdexcept>

namespace kvconf::kernels {

void Registry::claim(const std::string& name) {
  if (name.empty()) throw std::invalid_argument("kvconf::kernels::Registry: a kernel needs a non-empty name");
  if (std::find(names_.begin(), names_.end(), name) != names_.end())
    throw std::invalid_argument("kvconf::kernels::Registry: duplicate kernel name '" + name + "'");
  names_.push_back(name);
}

void Registry::add(GemmKernel k) {
  claim(k.info.name);
  gemm_.push_back(std::move(k));
}
void Registry::add(NormKernel k) {
  claim(k.info.name);
  norm_.push_back(std::move(k));
}
void Registry::add(AttentionKernel k) {
  claim(k.info.name);
  attention_.push_back(std::move(k));
}

namespace {
template <class K>
const K* find_in(const std::vector<K>& v, std::string_view name) {
  for (const K& k : v)
    if (k.info.name == name) return &k;
  return nullptr;
}
}  // namespace

const GemmKernel* Registry::find_gemm(std::string_view name) const { return find_in(gemm_, name); }
const NormKernel* Registry::find_norm(std::string_view name) const { return find_in(norm_, name); }
const AttentionKernel* Registry::find_attention(std::string_view name) const { return find_in(attention_, name); }

std::vector<std::string> Registry::names() const { return names_; }

std::string format_suffix(Format f) {
  switch (f) {
    case Format::fp16:
      return "f16";
    case Format::bf16:
      return "bf16";
    case Format::fp32:
      return "f32";
    default:
      throw std::invalid_argument("kvconf kernels: kernel formats are fp16, bf16 or fp32");
  }
}

Registry cpu_registry() {
  Registry r;
  register_cpu_kernels(r);
  return r;
}

}  // namespace kvconf::kernels
