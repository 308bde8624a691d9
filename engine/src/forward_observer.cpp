// ForwardOptions' captures and patches as the forward pass's observer (forward_observer.hpp).
#include "forward_observer.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kvconf::engine {

// The last row of t (rows_ rows) becomes each matching patch's row.
void OptionsObserver::op(std::size_t l, OpStage s, std::vector<float>& t) {
  for (const OpPatch& p : o_->op_patches) {
    if (p.layer != l || p.stage != s) continue;
    const std::size_t width = t.size() / rows_;
    if (p.row.size() != width)
      throw std::invalid_argument("kvconf::engine: op patch " + std::string(op_stage_name(s)) + " of layer " +
                                  std::to_string(l) + " has " + std::to_string(p.row.size()) + " values (expected " +
                                  std::to_string(width) + ")");
    std::copy(p.row.begin(), p.row.end(), t.begin() + static_cast<std::ptrdiff_t>((rows_ - 1) * width));
  }
}

void OptionsObserver::residual(std::size_t l, std::vector<float>& x) {
  for (const ResidualPatch& p : o_->patches) {
    if (p.layer != l) continue;
    if (p.row.size() != hidden_)
      throw std::invalid_argument("kvconf::engine: residual patch for layer " + std::to_string(l) + " has " +
                                  std::to_string(p.row.size()) +
                                  " values (expected hidden = " + std::to_string(hidden_) + ")");
    std::copy(p.row.begin(), p.row.end(), x.begin() + static_cast<std::ptrdiff_t>((rows_ - 1) * hidden_));
  }
}

void OptionsObserver::layer(std::size_t /*l*/, LayerTrace&& values) {
  if (o_->capture_layers) trace_->layers.push_back(std::move(values));
}

void OptionsObserver::hidden(const std::vector<float>& x) {
  if (o_->capture_hidden) trace_->hidden.push_back(x);
}

}  // namespace kvconf::engine
