// Resolving the protocol's model, tokenizer and prompts (protocol_inputs.hpp), all checked before any pair runs.
#include "kvconf/protocol/protocol_inputs.hpp"

#include <cstdio>
#include <exception>
#include <map>

#include "kvconf/protocol/bad_input.hpp"
#include "kvconf/protocol/gsm8k.hpp"
#include "kvconf/analysis/prompts.hpp"
#include "kvconf/conformance/model_cases.hpp"

namespace kvconf::protocol {
namespace fs = std::filesystem;
namespace {

std::string numbered(const char* fmt, std::size_t i) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, i);
  return buf;
}

fs::path shared_gsm8k(const ProtocolOptions& o) { return o.shared_dir / "data" / "gsm8k" / "test.jsonl"; }

// The effective n of N available: o.n, or all of them when clamp_n and o.n > N.
std::size_t effective_n(const ProtocolOptions& o, std::size_t N, const std::string& what) {
  if (o.n == 0) throw BadInput("--n must be >= 1 (got 0)");
  if (o.n <= N) return o.n;
  if (o.clamp_n) return N;
  throw BadInput("--n " + std::to_string(o.n) + " is larger than the " + std::to_string(N) + " " + what);
}

void check_fits(const ProtocolOptions& o, const ProtocolPrompt& p, std::size_t max_positions, const std::string& file) {
  if (max_positions > 0 && p.ids.size() + o.max_new_tokens > max_positions)
    throw BadInput("prompt " + p.id + " of " + file + " has " + std::to_string(p.ids.size()) +
                   " tokens; with --max-new-tokens " + std::to_string(o.max_new_tokens) +
                   " it exceeds the model's max_position_embeddings " + std::to_string(max_positions) +
                   " (lower --shots or --max-new-tokens)");
}

}  // namespace

ModelSource resolve_model(const ProtocolOptions& o) {
  if (o.model.empty()) throw BadInput("--model is required (fixture:NAME, a checkpoint folder, config.json or .bin)");
  ModelSource m;
  m.name = o.model;
  if (o.model.rfind("fixture:", 0) == 0) {
    const std::string name = o.model.substr(8);
    const auto all = conformance::model_fixtures(o.fixtures_dir, o.shared_dir);
    std::string names;
    for (const auto& f : all) names += (names.empty() ? "" : ", ") + f.name;
    const conformance::ModelFixture* fx = nullptr;
    for (const auto& f : all)
      if (f.name == name) fx = &f;
    if (!fx) throw BadInput("--model: unknown fixture '" + name + "' (expected one of " + names + ")");
    if (const auto why = conformance::fixture_missing(*fx)) throw BadInput("--model: " + *why);
    m.path = fx->model;
    m.default_prompts = fx->prompts;
    return m;
  }
  m.path = o.model;
  std::error_code ec;
  if (!fs::exists(m.path, ec)) throw BadInput(o.model + ": no such file or directory (--model)");
  return m;
}

fs::path tokenizer_path(const ProtocolOptions& o, const ModelSource& m) {
  if (!o.tokenizer.empty()) return o.tokenizer;
  std::error_code ec;
  if (fs::is_directory(m.path, ec) && fs::is_regular_file(m.path / "tokenizer.json", ec))
    return m.path / "tokenizer.json";
  return o.shared_dir / "tokenizers" / "llama2" / "tokenizer.model";
}

PromptSet resolve_prompts(const ProtocolOptions& o, const ModelSource& m, std::size_t vocab, std::size_t max_positions,
                          std::size_t tokenizer_vocab,
                          const std::function<std::vector<int>(const std::string&)>& encode) {
  PromptSet s;
  s.spec = o.prompts;
  if (s.spec.empty()) {
    if (!m.default_prompts.empty())
      s.spec = "ids:" + m.default_prompts.string();
    else
      s.spec = "gsm8k:" + shared_gsm8k(o).string();
  }
  const std::size_t colon = s.spec.find(':');
  const std::string kind = colon == std::string::npos ? "" : s.spec.substr(0, colon);
  const fs::path file = colon == std::string::npos ? fs::path() : fs::path(s.spec.substr(colon + 1));
  if ((kind != "gsm8k" && kind != "ids") || file.empty())
    throw BadInput("--prompts '" + s.spec + "': expected gsm8k:FILE (GSM8K jsonl) or ids:FILE (a prompt-set file)");
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) throw BadInput(file.string() + ": no such file (--prompts " + kind + ":)");

  if (kind == "gsm8k") {
    if (tokenizer_vocab == 0)
      throw BadInput("--prompts gsm8k: needs a tokenizer: " + tokenizer_path(o, m).string() +
                     " is missing (pass --tokenizer FILE)");
    if (tokenizer_vocab > vocab)
      throw BadInput("--prompts gsm8k: the tokenizer " + tokenizer_path(o, m).string() + " has " +
                     std::to_string(tokenizer_vocab) + " pieces but the model " + m.name + " has a vocabulary of " +
                     std::to_string(vocab) + " (they do not match: pass the model's --tokenizer, or ids: prompts)");
    const std::vector<Gsm8kProblem> all = read_gsm8k(file);
    s.available = all.size();
    s.n = effective_n(o, all.size(), "problems in " + file.string());
    const std::vector<std::size_t> pick = sample_indices(all.size(), s.n, o.sample_seed);
    const std::vector<std::size_t> ex = exemplar_indices(all.size(), pick, o.shots);
    for (std::size_t e : ex) s.exemplars.push_back(all[e].index);
    for (std::size_t i : pick) {
      ProtocolPrompt p;
      p.id = numbered("gsm8k:%04zu", all[i].index);
      p.ids = encode(gsm8k_prompt(all, ex, all[i]));
      p.gold = all[i].gold;
      check_fits(o, p, max_positions, file.string());
      s.prompts.push_back(std::move(p));
    }
    return s;
  }

  std::vector<analysis::Prompt> all;
  try {
    all = analysis::read_prompts(file);
  } catch (const std::exception& e) {
    throw BadInput(std::string(e.what()) + " (--prompts ids:)");
  }
  if (all.empty()) throw BadInput(file.string() + ": field 'prompts': no prompts (--prompts ids:)");
  s.available = all.size();
  s.n = effective_n(o, all.size(), "prompts in " + file.string());
  // Prompts made from GSM8K questions (fixtures' "gsm8k_NNNN", NNNN = the line) get their gold answer from the
  // shared test.jsonl when it is there.
  std::map<std::size_t, std::string> gold;
  std::error_code gec;
  if (fs::is_regular_file(shared_gsm8k(o), gec)) {
    bool any = false;
    for (const auto& p : all) any = any || p.id.rfind("gsm8k_", 0) == 0;
    if (any)
      for (const Gsm8kProblem& g : read_gsm8k(shared_gsm8k(o))) gold[g.index] = g.gold;
  }
  const int width = all.size() > 100 ? static_cast<int>(std::to_string(all.size() - 1).size()) : 2;
  for (std::size_t i : sample_indices(all.size(), s.n, o.sample_seed)) {
    ProtocolPrompt p;
    char buf[32];
    std::snprintf(buf, sizeof buf, "ids:%0*zu", width, i);
    p.id = buf;
    p.ids = all[i].ids;
    if (p.ids.empty()) throw BadInput(file.string() + ": prompts[" + std::to_string(i) + "].ids: empty");
    for (int t : p.ids)
      if (t < 0 || static_cast<std::size_t>(t) >= vocab)
        throw BadInput(file.string() + ": prompts[" + std::to_string(i) + "].ids: token " + std::to_string(t) +
                       " is outside the model's vocabulary [0, " + std::to_string(vocab) + ")");
    if (all[i].id.rfind("gsm8k_", 0) == 0) {
      try {
        const auto it = gold.find(std::stoul(all[i].id.substr(6)));
        if (it != gold.end()) p.gold = it->second;
      } catch (const std::exception&) {
      }
    }
    check_fits(o, p, max_positions, file.string());
    s.prompts.push_back(std::move(p));
  }
  return s;
}

}  // namespace kvconf::protocol
