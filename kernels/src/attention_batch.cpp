// run_attention_batch: a batched decode step's attention launch, through the kernel's own batched entry or, for a
// kernel that launches one sequence per call, one `run` per sequence with the step's batch size in its call.
#include <stdexcept>
#include <string>

#include "kvconf/kernels/kernel.hpp"

namespace kvconf::kernels {

void run_attention_batch(const AttentionKernel& k, std::span<const AttentionSeq> seqs) {
  for (const AttentionSeq& s : seqs)
    if (s.call.batch != seqs.size())
      throw std::invalid_argument("run_attention_batch: " + k.info.name + ": a sequence's call.batch is " +
                                  std::to_string(s.call.batch) + ", expected the launch's " +
                                  std::to_string(seqs.size()) + " sequences");
  if (k.run_batch) {
    k.run_batch(seqs);
    return;
  }
  for (const AttentionSeq& s : seqs) k.run(s.call, s.q, s.k_cache, s.v_cache, s.out);
}

}  // namespace kvconf::kernels
