// The forward pass's observer (internal): what the model's steps show to whoever watches the computation (captures)
// or steers it (op and activation patching), between the ops. The model's steps name the points; an observer decides
// what happens there. ForwardOptions' captures and patches are one observer (OptionsObserver).
#pragma once

#include <cstddef>
#include <vector>

#include "kvconf/engine/context.hpp"

namespace kvconf::engine {

class ForwardObserver {
 public:
  ForwardObserver() = default;
  ForwardObserver(const ForwardObserver&) = delete;
  ForwardObserver& operator=(const ForwardObserver&) = delete;
  virtual ~ForwardObserver() = default;
  // Op `s` of layer l has computed t: (rows, width); it may be rewritten before any later op reads it.
  virtual void op(std::size_t /*l*/, OpStage /*s*/, std::vector<float>& /*t*/) {}
  // Layer l's output residual stream x: (rows, hidden) before the next layer reads it; it may be rewritten.
  virtual void residual(std::size_t /*l*/, std::vector<float>& /*x*/) {}
  // Every value layer l computed, under LayerTrace's names (x_out after residual()).
  virtual void layer(std::size_t /*l*/, LayerTrace&& /*values*/) {}
  // The residual stream x: (rows, hidden) entering layer 0 (the embeddings) and leaving each layer.
  virtual void hidden(const std::vector<float>& /*x*/) {}
};

// ForwardOptions' taps on a one-sequence call of `rows` rows: op_patches and patches rewrite the call's last row,
// capture_layers and capture_hidden fill `trace`. A patch of the wrong width throws std::invalid_argument naming it.
class OptionsObserver final : public ForwardObserver {
 public:
  OptionsObserver(const ForwardOptions& o, Trace& trace, std::size_t rows, std::size_t hidden)
      : o_(&o), trace_(&trace), rows_(rows), hidden_(hidden) {}
  void op(std::size_t l, OpStage s, std::vector<float>& t) override;
  void residual(std::size_t l, std::vector<float>& x) override;
  void layer(std::size_t l, LayerTrace&& values) override;
  void hidden(const std::vector<float>& x) override;

 private:
  const ForwardOptions* o_;
  Trace* trace_;
  std::size_t rows_, hidden_;
};

}  // namespace kvconf::engine
