// The forward pass over the rows of one call (internal to Context): embeddings, the decoder layers of Llama-2,
// Mistral and Gemma-2 with the profile's kernels, the final norm and the LM head on the last row.
#pragma once

#include <span>
#include <vector>

#include "kvconf/engine/context.hpp"

namespace kvconf::engine {

struct ForwardCall {
  std::span<const int> tokens;  // the call's rows, at absolute positions cache.n ...
  bool cached_path = false;     // true for prefill/decode (the path faults act on), false for recompute
  Fault fault = Fault::none;
};

// Appends the call's K/V rows to `cache` (growing it by doubling) and returns the last row's logits: (vocab).
std::vector<float> forward_rows(const Model& m, const ProfileKernels& k, KvCache& cache, const ForwardCall& call,
                                const ForwardOptions& o, Trace& trace);

}  // namespace kvconf::engine
