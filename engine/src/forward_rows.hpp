// The rows of one forward call (internal to the forward pass): which sequence each row belongs to and at which
// position, so the model's steps can run over all rows together and hand each sequence its own rows where the model
// is per sequence (RoPE positions, the cache writes, attention, the LM head's last row).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "forward.hpp"

namespace kvconf::engine {

class KvStore;  // kv_store.hpp

// One sequence's rows in the call.
struct SeqRows {
  std::size_t row0 = 0;       // its first row in the call
  std::size_t n = 0;          // its rows
  std::size_t pos0 = 0;       // the absolute position of its first row (the rows its cache held)
  std::size_t write_row = 0;  // the cache row its first row is written to (ForwardHooks::cache_write_row)
  bool decode = false;        // one row on the cached path after a prefill
  KvCache* cache = nullptr;
  Trace* trace = nullptr;
};

class RowBatch {
 public:
  // Per segment, in order: checks its tokens (at least one, each in [0, vocab)), lays out its rows, asks the hooks
  // for its first row's RoPE position and cache row, makes room in its cache (kv.make_room) and resets its trace to
  // describe its rows. Throws std::invalid_argument naming the token.
  RowBatch(const ModelConfig& c, std::span<const Segment> segments, const ForwardHooks& hooks, bool cached_path,
           const KvStore& kv);

  std::size_t rows() const { return tokens_.size(); }  // n: every row of the call
  std::size_t sequences() const { return seqs_.size(); }
  std::span<const SeqRows> seqs() const { return seqs_; }
  std::span<const int> tokens() const { return tokens_; }                // (n): every sequence's tokens in turn
  std::span<const std::size_t> positions() const { return positions_; }  // (n): each row's RoPE position
  std::size_t longest() const { return longest_; }  // the longest attended prefix: max over sequences of pos0 + n

  // Sequence s's rows of t: (n, width) -> (s.n, width).
  static std::span<const float> rows_of(const std::vector<float>& t, const SeqRows& s, std::size_t width);
  // out: (n, width) = f(s, q_s, out_s) for each sequence s, q_s its rows of q: (n, width) and out_s (s.n, width).
  template <class F>
  std::vector<float> per_sequence(const std::vector<float>& q, std::size_t width, F f) const;
  // Each sequence's last row of t: (n, width) -> (sequences, width).
  std::vector<float> last_rows(const std::vector<float>& t, std::size_t width) const;
  // Each sequence's trace keeps its row of last: (sequences, width) as Trace::final_normed.
  void keep_final_normed(const std::vector<float>& last, std::size_t width) const;
  // (sequences, width) -> one vector per sequence.
  static std::vector<std::vector<float>> split(const std::vector<float>& t, std::size_t width);

 private:
  std::vector<SeqRows> seqs_;
  std::vector<int> tokens_;
  std::vector<std::size_t> positions_;
  std::size_t longest_ = 0;
};

template <class F>
std::vector<float> RowBatch::per_sequence(const std::vector<float>& q, std::size_t width, F f) const {
  std::vector<float> out(rows() * width);
  if (seqs_.size() == 1) {  // q and out are the one sequence's rows
    f(seqs_.front(), q, out);
    return out;
  }
  for (const SeqRows& s : seqs_) {
    const auto qs = rows_of(q, s, width);
    std::vector<float> q_s(qs.begin(), qs.end()), out_s(s.n * width);
    f(s, q_s, out_s);
    std::ranges::copy(out_s, out.begin() + static_cast<std::ptrdiff_t>(s.row0 * width));
  }
  return out;
}

}  // namespace kvconf::engine
