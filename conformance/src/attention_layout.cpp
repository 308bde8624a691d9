// The attention checks' input and call layouts (attention_layout.hpp, which states what each promises).
#include "attention_layout.hpp"

#include <algorithm>

#include "checks_common.hpp"

namespace kvconf::conformance::detail {

using kernels::AttentionCall;

Problem make_problem(Format in, const AttentionCall& call, Data data, std::uint64_t seed) {
  const auto& s = call.shape;
  const double qk_scale = data == Data::wide_range ? 0x1p-4 : 1.0;
  const Data v_data = (data == Data::near_exp_overflow || data == Data::p_flush) ? Data::normal : data;
  Problem p;
  p.call = call;
  p.q = make_values(s.n_q * s.n_heads * s.d, in, data, detail::sub_seed(seed, "q"), qk_scale);
  const std::size_t spare = call.cap() - s.n_kv;
  p.k = make_values(s.n_kv * s.n_kv_heads * s.d, in, data, detail::sub_seed(seed, "k"), qk_scale);
  p.v = make_values(s.n_kv * s.n_kv_heads * s.d_v, in, v_data, detail::sub_seed(seed, "v"));
  const auto ku = make_values(spare * s.n_kv_heads * s.d, in, data, detail::sub_seed(seed, "k_unused"), qk_scale);
  const auto vu = make_values(spare * s.n_kv_heads * s.d_v, in, v_data, detail::sub_seed(seed, "v_unused"));
  p.k.insert(p.k.end(), ku.begin(), ku.end());
  p.v.insert(p.v.end(), vu.begin(), vu.end());
  return p;
}

std::vector<float> recap(const std::vector<float>& cache, std::size_t row, std::size_t n_kv, std::size_t cap,
                         std::optional<float> fill) {
  std::vector<float> out(cap * row);
  std::copy_n(cache.begin(), n_kv * row, out.begin());
  const std::size_t have = cache.size() / row;
  for (std::size_t r = n_kv; r < cap; ++r)
    for (std::size_t c = 0; c < row; ++c)
      out[r * row + c] =
          fill ? *fill
               : (r < have ? cache[r * row + c] : cache[((r - n_kv) % std::max<std::size_t>(n_kv, 1)) * row + c]);
  return out;
}

AttentionCall sub_call(const AttentionCall& full, std::size_t r0, std::size_t r1) {
  AttentionCall c = full;
  c.shape.n_q = r1 - r0;
  c.params.q_offset = full.params.q_offset + static_cast<std::int64_t>(r0);
  if (full.params.causal) c.shape.n_kv = static_cast<std::size_t>(c.params.q_offset) + c.shape.n_q;
  c.capacity = full.cap();
  return c;
}

BatchLaunch batch_calls(const AttentionCall& alone, std::size_t size) {
  BatchLaunch b;
  b.target = size / 2;
  const std::size_t n_kv = alone.shape.n_kv;
  b.min_kv = b.max_kv = n_kv;
  for (std::size_t i = 0, j = 0; i < size; ++i) {
    AttentionCall c = alone;
    c.batch = size;
    if (i != b.target) {
      c.shape.n_kv = 1 + (n_kv * (j + 2) / 3 + 7 * j) % (2 * n_kv);  // shorter and longer (attention_layout.hpp)
      c.params.q_offset = alone.params.causal ? static_cast<std::int64_t>(c.shape.n_kv) - 1 : 0;
      c.capacity = 0;
      b.min_kv = std::min(b.min_kv, c.shape.n_kv);
      b.max_kv = std::max(b.max_kv, c.shape.n_kv);
      ++j;
    }
    b.calls.push_back(c);
  }
  return b;
}

std::size_t unused_slots_capacity(const AttentionCall& call) {
  return std::max(call.cap(), (call.shape.n_kv + 63) / 64 * 64 + 64);
}

std::vector<std::size_t> capacity_variants(const AttentionCall& call) {
  const std::size_t n_kv = call.shape.n_kv;
  std::vector<std::size_t> caps = {n_kv + 1, (n_kv + 63) / 64 * 64 + 64, 2 * n_kv + 37, call.cap()};
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  caps.erase(std::remove(caps.begin(), caps.end(), n_kv), caps.end());
  return caps;
}

}  // namespace kvconf::conformance::detail
