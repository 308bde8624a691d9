// A GGUF's weight types through ggml's own GGUF reader (gguf.h, header only: no tensor data is read) and the CPU
// backend's type traits (ggml-cpu.h: vec_dot_type, the format a matrix product's second operand is converted to).
#include "gguf_weights.hpp"

#include <ggml-cpu.h>
#include <gguf.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "kvconf/protocol/bad_input.hpp"

namespace kvconf::llama_cpp {

namespace {

struct GgufDeleter {
  void operator()(gguf_context* c) const { gguf_free(c); }
};

// llama_ftype values (llama.h) that name one ggml type for every 2-D tensor.
std::string file_type_name(long long ftype) {
  static const std::pair<long long, ggml_type> named[] = {{0, GGML_TYPE_F32},  {1, GGML_TYPE_F16},  {2, GGML_TYPE_Q4_0},
                                                          {3, GGML_TYPE_Q4_1}, {7, GGML_TYPE_Q8_0}, {8, GGML_TYPE_Q5_0},
                                                          {9, GGML_TYPE_Q5_1}, {32, GGML_TYPE_BF16}};
  for (const auto& [n, t] : named)
    if (n == ftype) return ggml_type_name(t);
  return "ftype" + std::to_string(ftype);
}

}  // namespace

std::string WeightTypes::dtype() const {
  return file_type == "f32" ? "float32" : file_type == "bf16" ? "bfloat16" : "float16";
}

WeightTypes read_weight_types(const std::string& gguf) {
  gguf_init_params p{};
  p.no_alloc = true;
  p.ctx = nullptr;
  const std::unique_ptr<gguf_context, GgufDeleter> g(gguf_init_from_file(gguf.c_str(), p));
  if (!g) throw protocol::BadInput(gguf + ": ggml's GGUF reader cannot read its header");
  WeightTypes w;
  const std::int64_t k = gguf_find_key(g.get(), "general.file_type");
  if (k < 0) throw protocol::BadInput(gguf + ": general.file_type is missing (llama_ftype, e.g. 3 for Q4_1)");
  const gguf_type kt = gguf_get_kv_type(g.get(), k);
  if (kt != GGUF_TYPE_UINT32 && kt != GGUF_TYPE_INT32)
    throw protocol::BadInput(gguf + ": general.file_type is not an integer");
  w.file_type = file_type_name(kt == GGUF_TYPE_UINT32 ? gguf_get_val_u32(g.get(), k) : gguf_get_val_i32(g.get(), k));
  for (std::int64_t i = 0; i < gguf_get_n_tensors(g.get()); ++i) {
    const ggml_type t = gguf_get_tensor_type(g.get(), i);
    ++w.tensors[ggml_type_name(t)];
    const ggml_type_traits_cpu* cpu = ggml_get_type_traits_cpu(t);
    if (cpu) w.mul_mat_in[ggml_type_name(t)] = ggml_type_name(cpu->vec_dot_type);
  }
  return w;
}

}  // namespace kvconf::llama_cpp
