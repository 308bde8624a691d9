// The rows of one forward call (forward_rows.hpp): the segments laid out one after another, each row's position.
#include "forward_rows.hpp"

#include <stdexcept>
#include <string>

#include "kv_store.hpp"

namespace kvconf::engine {

RowBatch::RowBatch(const ModelConfig& c, std::span<const Segment> segments, const ForwardHooks& hooks, bool cached_path,
                   const KvStore& kv) {
  for (const Segment& g : segments) {
    if (g.tokens.empty()) throw std::invalid_argument("kvconf::engine: a forward call needs at least one token");
    for (const int t : g.tokens)
      if (t < 0 || static_cast<std::size_t>(t) >= c.vocab)
        throw std::invalid_argument("kvconf::engine: token id " + std::to_string(t) + " outside the vocabulary [0, " +
                                    std::to_string(c.vocab) + ")");
    SeqRows s;
    s.row0 = tokens_.size(), s.n = g.tokens.size(), s.pos0 = g.cache->n, s.cache = g.cache, s.trace = g.trace;
    s.decode = cached_path && s.n == 1 && s.pos0 > 0;
    s.write_row = hooks.cache_write_row(s.pos0, s.decode);
    for (std::size_t r = 0; r < s.n; ++r)
      positions_.push_back(r == 0 ? hooks.rope_position(s.pos0, s.decode) : s.pos0 + r);
    kv.make_room(*g.cache, s.pos0 + s.n);
    tokens_.insert(tokens_.end(), g.tokens.begin(), g.tokens.end());
    longest_ = std::max(longest_, s.pos0 + s.n);
    *g.trace = Trace{};
    g.trace->rows = s.n;
    g.trace->pos0 = s.pos0;
    seqs_.push_back(s);
  }
  for (const SeqRows& s : seqs_) s.trace->batch_rows = rows();
}

std::span<const float> RowBatch::rows_of(const std::vector<float>& t, const SeqRows& s, std::size_t width) {
  return std::span<const float>(t).subspan(s.row0 * width, s.n * width);
}

std::vector<float> RowBatch::last_rows(const std::vector<float>& t, std::size_t width) const {
  std::vector<float> last(seqs_.size() * width);
  for (std::size_t i = 0; i < seqs_.size(); ++i)
    std::copy_n(t.begin() + static_cast<std::ptrdiff_t>((seqs_[i].row0 + seqs_[i].n - 1) * width), width,
                last.begin() + static_cast<std::ptrdiff_t>(i * width));
  return last;
}

void RowBatch::keep_final_normed(const std::vector<float>& last, std::size_t width) const {
  for (std::size_t i = 0; i < seqs_.size(); ++i)
    seqs_[i].trace->final_normed.assign(last.begin() + static_cast<std::ptrdiff_t>(i * width),
                                        last.begin() + static_cast<std::ptrdiff_t>((i + 1) * width));
}

std::vector<std::vector<float>> RowBatch::split(const std::vector<float>& t, std::size_t width) {
  std::vector<std::vector<float>> parts(t.size() / width);
  for (std::size_t i = 0; i < parts.size(); ++i)
    parts[i].assign(t.begin() + static_cast<std::ptrdiff_t>(i * width),
                    t.begin() + static_cast<std::ptrdiff_t>((i + 1) * width));
  return parts;
}

}  // namespace kvconf::engine
