// llama.cpp runs for kvconf traces through llama.h: a context per run (n_ctx = the run's length, one sequence), the
// prompt in one llama_decode, then one token per llama_decode (cache ON) or the cache cleared and everything decoded
// again (cache OFF), and the scenario sides (prefix, refill, restore, batch, preempt) over more sequences or contexts;
// the logits of the last row of each call, chosen from by kvconf's sampler with the shared draws.
#include "llama_run.hpp"

#include <llama.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace kvconf::llama_cpp {

namespace {

// llama.cpp's error lines since the last BadInput, kept for its one-line message of a BadInput (its log is otherwise
// start-up chatter; KVCONF_LLAMA_LOG=1 prints all of it to stderr).
std::string& last_error() {
  static std::string e;
  return e;
}

void quiet_log(ggml_log_level level, const char* text, void*) {
  static const bool all = std::getenv("KVCONF_LLAMA_LOG") != nullptr;
  if (all) std::fputs(text, stderr);
  if (level != GGML_LOG_LEVEL_ERROR) return;
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  std::string& e = last_error();
  if (!t.empty() && e.size() < 400) e += (e.empty() ? "" : "; ") + t;
}

// " (llama.cpp: <its errors>)", or nothing when it logged none.
std::string llama_said() {
  std::string e = std::exchange(last_error(), std::string());
  return e.empty() ? std::string() : " (llama.cpp: " + e + ")";
}

void init_backend() {
  static std::once_flag once;
  std::call_once(once, [] {
    llama_log_set(quiet_log, nullptr);
    llama_backend_init();
  });
}

// The K and V cache types llama.cpp offers, in the order --help lists them.
ggml_type cache_type_of(const std::string& name) {
  static const std::pair<const char*, ggml_type> types[] = {
      {"f32", GGML_TYPE_F32}, {"f16", GGML_TYPE_F16}, {"q8_0", GGML_TYPE_Q8_0}, {"q4_0", GGML_TYPE_Q4_0}};
  std::string list;
  for (const auto& [n, t] : types) {
    if (name == n) return t;
    list += (list.empty() ? "" : ", ") + std::string(n);
  }
  throw BadInput("--cache-type '" + name + "': expected one of " + list);
}

std::string meta(const llama_model* m, const char* key) {
  char buf[256];
  const int n = llama_model_meta_val_str(m, key, buf, sizeof buf);
  return n < 0 ? std::string() : std::string(buf, static_cast<std::size_t>(std::min<int>(n, sizeof buf - 1)));
}

struct ContextDeleter {
  void operator()(llama_context* c) const { llama_free(c); }
};

}  // namespace

void check_cache_type(const std::string& name) { (void)cache_type_of(name); }

void check_event_step(const std::string& scenario, std::size_t at_step, std::size_t max_new_tokens) {
  if (scenario == "preempt") {  // the recompute is step at_step's own call: a step before it
    if (!(at_step >= 1 && at_step < max_new_tokens))
      throw BadInput("--at-step " + std::to_string(at_step) + ": expected 1 to " +
                     std::to_string(max_new_tokens < 1 ? 0 : max_new_tokens - 1) +
                     " for --scenario preempt (--max-new-tokens " + std::to_string(max_new_tokens) + ")");
    return;
  }
  if (scenario != "refill" && scenario != "restore") return;
  if (max_new_tokens < 3)
    throw BadInput("--scenario " + scenario + " needs --max-new-tokens 3 or more (a step before the event and one " +
                   "after it), got " + std::to_string(max_new_tokens));
  if (!(at_step >= 1 && at_step + 1 < max_new_tokens))
    throw BadInput("--at-step " + std::to_string(at_step) + ": expected 1 to " + std::to_string(max_new_tokens - 2) +
                   " for --scenario " + scenario + " (--max-new-tokens " + std::to_string(max_new_tokens) + ")");
}

Model::Model(const std::string& gguf, bool vocab_only) : file_(gguf) {
  init_backend();
  llama_model_params p = llama_model_default_params();
  p.n_gpu_layers = 0;
  p.vocab_only = vocab_only;
  model_ = llama_model_load_from_file(gguf.c_str(), p);
  if (!model_) throw BadInput(gguf + ": llama.cpp cannot load this GGUF" + llama_said());
  try {
    weights_ = read_weight_types(gguf);
  } catch (...) {
    llama_model_free(model_);
    throw;
  }
}

Model::~Model() {
  if (model_) llama_model_free(model_);
}

std::size_t Model::vocab() const {
  return static_cast<std::size_t>(llama_vocab_n_tokens(llama_model_get_vocab(model_)));
}
std::size_t Model::n_layers() const { return static_cast<std::size_t>(llama_model_n_layer(model_)); }
std::size_t Model::hidden() const { return static_cast<std::size_t>(llama_model_n_embd(model_)); }
std::string Model::arch() const { return meta(model_, "general.architecture"); }

namespace {

using ContextPtr = std::unique_ptr<llama_context, ContextDeleter>;

// Every prompt token inside the vocabulary, and the run options usable.
void check_run(const Model& m, const std::vector<int>& prompt, const RunOptions& o) {
  const std::size_t V = m.vocab();
  if (prompt.empty()) throw BadInput("an empty prompt");
  for (int t : prompt)
    if (t < 0 || static_cast<std::size_t>(t) >= V)
      throw BadInput("prompt token " + std::to_string(t) + " is outside the model's vocabulary [0, " +
                     std::to_string(V) + ")");
  if (o.threads < 1 || o.batch < 1) throw BadInput("--threads and --batch must be at least 1");
}

// A context of `cells` KV rows for `seqs` sequences (`unified`: one KV buffer the sequences share, which copying a
// prefix between them needs; else llama.cpp's default of one stream per sequence, cells / seqs rows each), every
// call one llama_decode of at most `rows` tokens.
ContextPtr make_context(const Model& m, const RunOptions& o, std::size_t cells, std::size_t seqs, bool unified,
                        std::size_t rows) {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<std::uint32_t>(cells);
  cp.n_batch = static_cast<std::uint32_t>(rows);  // every call is one llama_decode (the prompt, a recompute)
  cp.n_ubatch = static_cast<std::uint32_t>(std::min<std::size_t>(static_cast<std::size_t>(o.batch), rows));
  cp.n_seq_max = static_cast<std::uint32_t>(seqs);
  cp.kv_unified = unified;
  cp.n_threads = cp.n_threads_batch = o.threads;
  cp.flash_attn_type = o.flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.type_k = cp.type_v = cache_type_of(o.cache_type);
  cp.swa_full = true;  // a sliding-window model keeps every row (cache-OFF recomputes them all anyway)
  cp.no_perf = true;
  ContextPtr ctx(llama_init_from_model(m.get(), cp));
  if (!ctx)
    throw BadInput("--cache-type " + o.cache_type + " --flash-attn " + (o.flash_attn ? "on" : "off") +
                   ": llama.cpp refused the context" + llama_said());
  return ctx;
}

// The rows llama.cpp's memory holds for sequence `seq` (0 when it holds none).
std::size_t rows_of(llama_context* ctx, llama_seq_id seq) {
  return static_cast<std::size_t>(llama_memory_seq_pos_max(llama_get_memory(ctx), seq) + 1);
}

struct BatchDeleter {
  void operator()(llama_batch* b) const {
    llama_batch_free(*b);
    delete b;
  }
};

// The rows every sequence of the context's memory holds (index: sequence id).
std::vector<std::size_t> memory_rows(llama_context* ctx) {
  std::vector<std::size_t> rows(llama_n_seq_max(ctx));
  for (std::size_t s = 0; s < rows.size(); ++s) rows[s] = rows_of(ctx, static_cast<llama_seq_id>(s));
  return rows;
}

// What one llama_decode did, as llama.cpp's memory reports it: sequence 0's call record and its rows after.
struct Decoded {
  std::vector<std::vector<float>> logits;  // (parts, V): each part's last row
  engine::CallRecord call;
  std::size_t after = 0;
};

// One llama_decode of several sequences' tokens (parts: {sequence, its tokens}, each continuing at the rows its
// sequence holds); the logits (V) of each part's last row, and the call as the memory's positions before and after
// it report it: sequence 0's growth and prior rows, every sequence's growth.
Decoded decode(llama_context* ctx, const std::vector<std::pair<llama_seq_id, std::vector<int>>>& parts,
               std::size_t V) {
  std::size_t total = 0;
  for (const auto& [seq, tokens] : parts) total += tokens.size();
  std::unique_ptr<llama_batch, BatchDeleter> b(
      new llama_batch(llama_batch_init(static_cast<std::int32_t>(total), 0, 1)));
  std::vector<std::int32_t> last;  // the batch index of each part's last row
  for (const auto& [seq, tokens] : parts) {
    const std::size_t pos0 = rows_of(ctx, seq);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const std::int32_t k = b->n_tokens++;
      b->token[k] = tokens[i];
      b->pos[k] = static_cast<llama_pos>(pos0 + i);
      b->n_seq_id[k] = 1;
      b->seq_id[k][0] = seq;
      b->logits[k] = i + 1 == tokens.size();
    }
    last.push_back(b->n_tokens - 1);
  }
  const std::vector<std::size_t> before = memory_rows(ctx);
  if (const int rc = llama_decode(ctx, *b); rc != 0)
    throw std::runtime_error("llama_decode returned " + std::to_string(rc) + " on a call of " + std::to_string(total) +
                             " tokens" + llama_said());
  const std::vector<std::size_t> after = memory_rows(ctx);
  Decoded d;
  for (std::size_t s = 0; s < before.size(); ++s) {
    if (after[s] < before[s])
      throw std::runtime_error("llama.cpp's memory holds fewer rows of sequence " + std::to_string(s) +
                               " after a llama_decode than before it");
    d.call.batch += after[s] - before[s];
  }
  d.call.fed = after[0] - before[0];
  d.call.cached = before[0];
  d.after = after[0];
  if (d.call.batch == d.call.fed) d.call.batch = 0;  // alone
  for (const std::int32_t k : last) {
    const float* z = llama_get_logits_ith(ctx, k);
    if (!z) throw std::runtime_error("llama_get_logits_ith returned no logits");
    d.logits.emplace_back(z, z + V);
  }
  return d;
}

// A decoded call recorded in r as llama.cpp's memory reported it; its parts' logits.
std::vector<std::vector<float>> record(RunResult& r, Decoded d) {
  r.calls.push_back(d.call);
  r.cache_after.push_back(d.after);
  return std::move(d.logits);
}

// One llama_decode of `tokens` for sequence 0, recorded in r; the last row's logits.
std::vector<float> call(llama_context* ctx, RunResult& r, std::vector<int> tokens, std::size_t V) {
  return std::move(record(r, decode(ctx, {{0, std::move(tokens)}}, V)).front());
}

// The token kvconf's sampler chooses at step t from z with the shared draw, recorded in r (the last call chose it).
int choose(RunResult& r, const RunOptions& o, std::size_t t, std::vector<float> z) {
  r.call_of_step.push_back(r.calls.size() - 1);
  const double u = engine::step_draw(o.sampler.seed, t);
  const int tok = engine::sample(o.sampler, z, u);
  r.generated.push_back(tok);
  r.draws.push_back(u);
  r.logits.push_back(std::move(z));
  return tok;
}

int argmax(const std::vector<float>& z) { return static_cast<int>(std::max_element(z.begin(), z.end()) - z.begin()); }

}  // namespace

RunResult run(const Model& m, const std::vector<int>& prompt, bool cache_on, const RunOptions& o) {
  check_run(m, prompt, o);
  const std::size_t V = m.vocab(), total = prompt.size() + o.max_new_tokens;
  const ContextPtr ctx = make_context(m, o, total, 1, false, total);
  RunResult r;
  std::vector<int> seq = prompt;
  for (std::size_t t = 0; t < o.max_new_tokens; ++t) {
    std::vector<float> z;
    if (!cache_on) {
      llama_memory_clear(llama_get_memory(ctx.get()), true);
      z = call(ctx.get(), r, seq, V);
      if (o.kv && t == o.kv_step) r.kv = read_kv(ctx.get(), 0, m.n_layers());
    } else if (t == 0 && o.chunk > 0) {  // the prompt in chunks; the last chunk's logits choose the first token
      for (std::size_t b = 0; b < seq.size(); b += o.chunk)
        z = call(ctx.get(), r,
                 std::vector<int>(seq.begin() + static_cast<std::ptrdiff_t>(b),
                                  seq.begin() + static_cast<std::ptrdiff_t>(std::min(seq.size(), b + o.chunk))),
                 V);
    } else if (t > 0 && o.plant == "recompute_on") {  // planted: a recompute passed off as a cache-ON step
      llama_memory_clear(llama_get_memory(ctx.get()), true);
      z = call(ctx.get(), r, seq, V);
    } else {
      z = call(ctx.get(), r, t == 0 ? seq : std::vector<int>{seq.back()}, V);
    }
    seq.push_back(choose(r, o, t, std::move(z)));
  }
  if (o.kv && cache_on) r.kv = read_kv(ctx.get(), 0, m.n_layers());
  return r;
}

RunResult run_scenario(const Model& m, const std::vector<int>& prompt, const ScenarioSide& s, const RunOptions& o) {
  check_run(m, prompt, o);
  const std::size_t V = m.vocab(), n = prompt.size(), T = o.max_new_tokens;
  const bool prefix = s.name == "prefix", batch = s.name == "batch", refill = s.name == "refill",
             restore = s.name == "restore", preempt = s.name == "preempt";
  if (!prefix && !batch && !refill && !restore && !preempt)
    throw BadInput("scenario '" + s.name + "': expected prefix, refill, restore, batch or preempt");
  check_event_step(s.name, s.at_step, T);
  if (prefix && (s.shared < 1 || s.shared >= n || s.donor.size() < s.shared ||
                 !std::equal(s.donor.begin(), s.donor.begin() + static_cast<std::ptrdiff_t>(s.shared), prompt.begin())))
    throw BadInput("prefix: the donor must share the prompt's first " + std::to_string(s.shared) +
                   " tokens, 1 <= shared < " + std::to_string(n));
  if (batch && (s.batch_with.empty() || std::any_of(s.batch_with.begin(), s.batch_with.end(),
                                                    [](const std::vector<int>& v) { return v.empty(); })))
    throw BadInput("batch: at least one other non-empty prompt to batch with");
  for (const auto& other : s.batch_with) check_run(m, other, o);
  if (prefix) check_run(m, s.donor, o);

  std::vector<std::vector<int>> seqs = {prompt};  // sequence 0 is this request; batch: the others follow
  if (batch) seqs.insert(seqs.end(), s.batch_with.begin(), s.batch_with.end());
  std::size_t longest = 0, all_rows = 0;
  for (const auto& q : seqs) longest = std::max(longest, q.size() + T), all_rows += q.size();
  // Prefix: the donor's rows and this request's in one buffer; batch: one stream per sequence, each `longest` rows.
  const std::size_t cells = prefix ? s.donor.size() + n + T : seqs.size() * longest;
  const std::size_t rows = std::max({all_rows, s.donor.size(), n + T});
  auto fresh = [&] { return make_context(m, o, cells, prefix ? 2 : seqs.size(), prefix, rows); };
  ContextPtr ctx = fresh();
  RunResult r;
  std::vector<float> z;
  if (prefix) {
    (void)decode(ctx.get(), {{1, s.donor}}, V);  // another request's prefill: not one of this run's calls
    llama_memory_t mem = llama_get_memory(ctx.get());
    llama_memory_seq_cp(mem, 1, 0, 0, static_cast<llama_pos>(s.shared));  // a prefix-cache hit: its first rows
    llama_memory_seq_rm(mem, 1, -1, -1);                                  // the donor request is done
    if (rows_of(ctx.get(), 0) != s.shared)
      throw std::runtime_error("llama_memory_seq_cp left " + std::to_string(rows_of(ctx.get(), 0)) +
                               " rows in sequence 0, expected " + std::to_string(s.shared));
    z = call(ctx.get(), r, std::vector<int>(prompt.begin() + static_cast<std::ptrdiff_t>(s.shared), prompt.end()), V);
  }
  for (std::size_t t = 0; t < T; ++t) {
    if (batch) {  // every sequence's prompt in the first call, then one token per sequence per call
      std::vector<std::pair<llama_seq_id, std::vector<int>>> parts;
      const std::size_t given = o.plant == "batch_alone" ? 1 : seqs.size();  // planted: this sequence alone
      for (std::size_t i = 0; i < given; ++i)
        parts.push_back({static_cast<llama_seq_id>(i), t == 0 ? seqs[i] : std::vector<int>{seqs[i].back()}});
      std::vector<std::vector<float>> zs = record(r, decode(ctx.get(), parts, V));
      for (std::size_t i = 1; i < seqs.size(); ++i)  // the others: greedy (their own token again when not decoded)
        seqs[i].push_back(i < zs.size() ? argmax(zs[i]) : seqs[i].back());
      z = std::move(zs.front());
    } else if (preempt && t == s.at_step) {  // preempted: the memory dropped; the prompt and every token so far
      llama_memory_clear(llama_get_memory(ctx.get()), true);  // decoded in one call, whose last row chooses the token
      z = call(ctx.get(), r, seqs[0], V);
    } else if (t > 0 || !prefix) {
      z = call(ctx.get(), r, t == 0 ? seqs[0] : std::vector<int>{seqs[0].back()}, V);
    }
    seqs[0].push_back(choose(r, o, t, std::move(z)));
    if (t + 1 != s.at_step) continue;
    if (refill) {  // preempted: the memory dropped, everything but the newest token decoded again in one call
      llama_memory_clear(llama_get_memory(ctx.get()), true);
      call(ctx.get(), r, std::vector<int>(seqs[0].begin(), seqs[0].end() - 1), V);
    } else if (restore) {  // the sequence's state saved, and generation continued in a new context restored from it
      const std::vector<std::uint8_t> state = save_sequence(ctx.get(), 0);
      ContextPtr copy = fresh();
      if (llama_state_seq_set_data(copy.get(), state.data(), state.size(), 0) == 0)
        throw std::runtime_error("llama_state_seq_set_data could not restore the saved sequence" + llama_said());
      ctx = std::move(copy);
    }
  }
  if (o.kv) r.kv = read_kv(ctx.get(), 0, m.n_layers());
  return r;
}

std::string engine_version() {
  init_backend();
  std::string info = llama_print_system_info();
  while (!info.empty() && (info.back() == ' ' || info.back() == '\n' || info.back() == '|')) info.pop_back();
  return "llama.cpp 0c1e570 (llama-cpp-python 0.3.36; " + info + ")";
}

}  // namespace kvconf::llama_cpp
