// What a GGUF's weights are stored in (general.file_type and every tensor's ggml type) and what ggml's CPU backend
// rounds a matrix product's activations to for each (its vec_dot_type), for the trace's model.weights: a quantised
// file (SmolLM2-135M-Instruct's Q4_1) is run as it is, and the trace says so (docs/LLAMA_CPP.md).
#pragma once

#include <map>
#include <string>

namespace kvconf::llama_cpp {

struct WeightTypes {
  // general.file_type as the ggml type it names ("f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0"), else
  // "ftype<N>" (llama_ftype N, a mix such as the K-quants).
  std::string file_type;
  std::map<std::string, int> tensors;             // ggml type name -> how many tensors hold it
  std::map<std::string, std::string> mul_mat_in;  // ggml type name -> the type ggml's CPU mul_mat rounds x to
  // The trace's dtype (the precision of everything but the quantised matrix products' inputs): "float32" for f32
  // and quantised files, "float16" for f16, "bfloat16" for bf16.
  std::string dtype() const;
  bool quantised() const { return file_type != "f32" && file_type != "f16" && file_type != "bf16"; }
};

// BadInput naming the file when gguf.h cannot read its header.
WeightTypes read_weight_types(const std::string& gguf);

}  // namespace kvconf::llama_cpp
