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
  // The trace's dtype, the format the weight products read their activations in: "float32" for f32, "bfloat16" for
  // bf16, "float16" for f16 and for quantised files. A quantised file's products read 8-bit blocks (q8_0, q8_1: int8
  // with an f16 scale), which no trace dtype names; it is not an fp32 reference (kvconf check's report would hold it to
  // Fp32TokensIdentical), and its rules are those of a 16-bit run: flips at near ties of the measured S.
  std::string dtype() const;
  bool quantised() const { return file_type != "f32" && file_type != "f16" && file_type != "bf16"; }
};

// BadInput naming the file when gguf.h cannot read its header.
WeightTypes read_weight_types(const std::string& gguf);

}  // namespace kvconf::llama_cpp
