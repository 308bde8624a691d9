// The attention call the engine makes for one layer (HF semantics), shared by the forward pass and the checks that
// replay it (conformance's EngineMatchesOracle): one definition of what the model asks its attention kernel.
#pragma once

#include <cstddef>

#include "kvconf/engine/config.hpp"
#include "kvconf/kernels/kernel.hpp"

namespace kvconf::engine {

// `rows` query rows at absolute positions pos0 .. pos0 + rows − 1, causal over the cache rows [0, pos0 + rows) of a
// cache of `capacity` rows; the layer's sliding window, the scale as the float the kernel multiplies by, the softcap.
kernels::AttentionCall layer_attention_call(const ModelConfig& c, std::size_t layer, std::size_t rows, std::size_t pos0,
                                            std::size_t capacity);

}  // namespace kvconf::engine
