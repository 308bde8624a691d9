// attention_pipeline_bound(): placeholder, replaced below in this session.
#include "kvconf/reference/attention_pipeline.hpp"

namespace kvconf::ref {
double attention_pipeline_bound(const AttentionPipeline&, const AttentionParams&, const AttentionElementStats&) {
  return kUnknown;
}
AttentionElementStats element_stats(const AttentionResult&, std::span<const double>, const AttentionShape&,
                                    const AttentionParams&, std::size_t, std::size_t, std::size_t) {
  return {};
}
}  // namespace kvconf::ref
