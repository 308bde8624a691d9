// `kvconf generate`: one model, one profile, one path (cache on or off), N decoded tokens, as JSON or a summary.
#include "generate_command.hpp"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli_output.hpp"
#include "kvconf/numerics/number_text.hpp"
#include "kvconf/engine/context.hpp"
#include "kvconf/engine/error.hpp"
#include "kvconf/engine/generate.hpp"
#include "kvconf/engine/model.hpp"
#include "kvconf/engine/profile.hpp"
#include "kvconf/engine/sampling.hpp"
#include "kvconf/engine/tokenizer.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/protocol/bad_input.hpp"

namespace kvconf::tools {
namespace {

// A problem with the user's input: becomes the one stderr line and exit status 2.
using protocol::BadInput;

// "1 2 3", "1,2,3" or "1, 2, 3" -> {1, 2, 3}. Throws BadInput naming the offending item.
std::vector<int> parse_prompt_ids(const std::string& s) {
  std::vector<int> ids;
  std::size_t i = 0;
  const auto is_sep = [](char c) { return c == ' ' || c == ',' || c == '\t' || c == '\n' || c == '\r'; };
  while (i < s.size()) {
    if (is_sep(s[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < s.size() && !is_sep(s[j])) ++j;
    const std::string item = s.substr(i, j - i);
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (end == item.c_str() || *end != '\0' || errno == ERANGE || v < INT32_MIN || v > INT32_MAX)
      throw BadInput("--prompt-ids: '" + item +
                     "' is not a token id (expected integers separated by spaces or commas)");
    ids.push_back(static_cast<int>(v));
    i = j;
  }
  return ids;
}

std::string join(const std::vector<int>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ' ';
    out += std::to_string(v[i]);
  }
  return out;
}

engine::Sampler make_sampler(const GenerateCliOptions& o) {
  engine::Sampler s;
  s.strategy = engine::parse_strategy(o.strategy);  // std::invalid_argument listing the choices
  if (o.top_k < 1) throw BadInput("--top-k must be >= 1 (got " + std::to_string(o.top_k) + ")");
  if (!(o.top_p > 0.0 && o.top_p <= 1.0)) throw BadInput("--top-p must be in (0, 1] (got " + num_option(o.top_p) + ")");
  if (!(o.temperature > 0.0) || !std::isfinite(o.temperature))
    throw BadInput("--temperature must be > 0 (got " + num_option(o.temperature) + ")");
  s.top_k = static_cast<std::size_t>(o.top_k);
  s.top_p = o.top_p;
  s.temperature = o.temperature;
  s.seed = o.seed;
  return s;
}

int run(const GenerateCliOptions& o) {
  // 1. The command line alone.
  if (o.model.empty()) throw BadInput("--model is required (a checkpoint folder, a config.json or a llama2.c .bin)");
  if (o.steps < 1) throw BadInput("--steps must be >= 1 (got " + std::to_string(o.steps) + ")");
  if (o.cache != "on" && o.cache != "off") throw BadInput("--cache must be 'on' or 'off' (got '" + o.cache + "')");
  const engine::CacheMode mode = o.cache == "on" ? engine::CacheMode::on : engine::CacheMode::off;
  if (o.prompt_given && o.prompt_ids_given) throw BadInput("give either --prompt or --prompt-ids, not both");
  if (!o.prompt_given && !o.prompt_ids_given)
    throw BadInput("a prompt is required: --prompt-ids \"1 2 3\" or --prompt TEXT");
  if (o.prompt_given && o.tokenizer.empty()) throw BadInput("--prompt needs --tokenizer PATH (a tokenizer.model)");
  std::vector<int> prompt;
  if (o.prompt_ids_given) {
    prompt = parse_prompt_ids(o.prompt_ids);
    if (prompt.empty()) throw BadInput("--prompt-ids: the prompt is empty");
  } else if (o.prompt.empty()) {
    throw BadInput("--prompt: the prompt is empty");
  }
  engine::GenerateOptions gen;
  gen.steps = static_cast<std::size_t>(o.steps);
  gen.sampler = make_sampler(o);

  // 2. Profile and kernels (the registry outlives the context: the profile's kernels point into it).
  const engine::Profile& profile = engine::find_profile(o.profile);  // std::invalid_argument listing the names
  const kernels::Registry registry = kernels::cpu_registry();
  const engine::ProfileKernels pk = engine::resolve(profile, registry);

  // 3. Tokenizer and prompt.
  std::optional<engine::Tokenizer> tok;
  if (!o.tokenizer.empty()) {
    if (!std::filesystem::exists(o.tokenizer)) throw BadInput(o.tokenizer + ": no such file (--tokenizer)");
    tok.emplace(engine::Tokenizer::load(o.tokenizer));
  }
  if (o.prompt_given) prompt = tok->encode(o.prompt, /*add_bos=*/true);

  // 4. Model, in the profile's storage format.
  if (!std::filesystem::exists(o.model)) throw BadInput(o.model + ": no such file or directory (--model)");
  const engine::Model model = engine::load_model(o.model, profile.storage);
  const std::size_t vocab = model.config.vocab;
  for (const int id : prompt)
    if (id < 0 || static_cast<std::size_t>(id) >= vocab)
      throw BadInput("prompt token id " + std::to_string(id) + " is outside the model's vocabulary [0, " +
                     std::to_string(vocab) + ")");
  // The cache grows with every token: a request longer than the model's context is refused, not run until memory
  // runs out (as the protocol's check_fits does for kvconf model / run).
  const std::size_t ctx_len = model.config.max_positions;
  if (ctx_len > 0 && (gen.steps > ctx_len || prompt.size() > ctx_len - gen.steps))
    throw BadInput("the prompt (" + std::to_string(prompt.size()) + " tokens) plus --steps " +
                   std::to_string(gen.steps) + " exceeds " + o.model + "'s context of " + std::to_string(ctx_len) +
                   " positions (max_position_embeddings / seq_len)");

  // 5. Generation.
  engine::Context ctx(model, pk);
  const auto t0 = std::chrono::steady_clock::now();
  const engine::GenerateResult res = engine::generate(ctx, prompt, mode, gen);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::optional<std::string> text;
  if (tok) text = tok->decode(res.tokens);

  if (o.json) {
    nlohmann::json j = {{"model", o.model},
                        {"arch", engine::arch_name(model.config.arch)},
                        {"profile", profile.name},
                        {"cache", engine::cache_mode_name(mode)},
                        {"strategy", gen.sampler.name()},
                        {"seed", o.seed},
                        {"steps", gen.steps},
                        {"prompt_ids", prompt},
                        {"tokens", res.tokens},
                        {"seconds", seconds}};
    if (text) j["text"] = *text;
    // Replace invalid UTF-8 (a decoded byte piece) rather than throw.
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("kvconf generate: %s (%s), profile %s, cache %s, %s, %zu steps in %.3f s\n", o.model.c_str(),
                engine::arch_name(model.config.arch), profile.name.c_str(), engine::cache_mode_name(mode),
                gen.sampler.name().c_str(), gen.steps, seconds);
    std::printf("prompt ids: %s\n", join(prompt).c_str());
    std::printf("tokens:     %s\n", join(res.tokens).c_str());
    if (text) std::printf("text:       %s\n", text->c_str());
  }
  return 0;
}

}  // namespace

int generate_command(const GenerateCliOptions& o) {
  try {
    return run(o);
  } catch (const engine::LoadError& e) {
    std::fprintf(stderr, "kvconf generate: %s\n", one_line(e.what()).c_str());
  } catch (const std::exception& e) {  // BadInput, std::invalid_argument from the engine, I/O errors
    std::fprintf(stderr, "kvconf generate: %s\n", one_line(e.what()).c_str());
  } catch (...) {
    std::fprintf(stderr, "kvconf generate: unexpected error\n");
  }
  return 2;
}

}  // namespace kvconf::tools
