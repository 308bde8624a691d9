// `kvconf model` (model_command.hpp): options, run_protocol with a progress bar, the per-(model, profile, strategy)
// summary, the report, and the exit status.
#include "model_command.hpp"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>

#include "cli_output.hpp"
#include "experiment_command.hpp"
#include "kvconf/engine/scenario.hpp"
#include "kvconf/protocol/bad_input.hpp"
#include "kvconf/protocol/slurm_shard.hpp"
#include "provenance.hpp"
#include "kvconf/reports/report.hpp"
#include "progress.hpp"
#include "protocol_names.hpp"

namespace kvconf::tools {
namespace {

std::size_t positive(long long v, const char* flag, bool zero_ok = false) {
  if (v < (zero_ok ? 0 : 1))
    throw BadInput(std::string(flag) + " must be >= " + (zero_ok ? "0" : "1") + " (got " + std::to_string(v) + ")");
  return static_cast<std::size_t>(v);
}

bool parse_u64(std::string_view s, std::uint64_t& v) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

struct Group {
  std::size_t pairs = 0, diverged = 0, failed = 0, with_gold = 0, right_on = 0, right_off = 0;
  double kl_free = 0.0, kl_teacher = 0.0, seconds = 0.0;
};

void print_summary(const ProtocolResult& r) {
  std::vector<std::string> order;
  std::map<std::string, Group> groups;
  for (const results::RunPairRecord& p : r.records) {
    const std::string k = p.model + "  " + p.profile + "  " + p.strategy;
    if (!groups.count(k)) order.push_back(k);
    Group& g = groups[k];
    ++g.pairs;
    g.diverged += p.free.flip.has_value();
    g.failed += !results::all_pass(p.rules);
    g.kl_free += p.free.mean_kl();
    g.kl_teacher += p.teacher.mean_kl();
    g.seconds += p.seconds;
    if (p.gold) {
      ++g.with_gold;
      g.right_on += p.correct_on;
      g.right_off += p.correct_off;
    }
  }
  std::printf("%-44s %6s %9s %11s %11s %6s %7s %7s %6s %8s\n", "model  profile  strategy", "pairs", "diverged",
              "meanKL", "meanKL(tf)", "flips", "accON", "accOFF", "fails", "s/pair");
  for (const std::string& k : order) {
    const Group& g = groups[k];
    const double n = static_cast<double>(g.pairs);
    char on[16] = "n/a", off[16] = "n/a";
    if (g.with_gold) {
      std::snprintf(on, sizeof on, "%.1f%%", 100.0 * g.right_on / g.with_gold);
      std::snprintf(off, sizeof off, "%.1f%%", 100.0 * g.right_off / g.with_gold);
    }
    std::printf("%-44s %6zu %8.1f%% %11.3e %11.3e %6zu %7s %7s %6zu %8.3f\n", k.c_str(), g.pairs,
                100.0 * g.diverged / n, g.kl_free / n, g.kl_teacher / n, g.diverged, on, off, g.failed, g.seconds / n);
  }
}

}  // namespace

std::vector<std::string> split_list(const std::string& text, const std::string& flag) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.empty()) throw BadInput(flag + " '" + text + "': an empty item (expected a comma-separated list)");
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<std::uint64_t> parse_seeds(const std::string& text) {
  std::vector<std::uint64_t> out;
  for (const std::string& item : split_list(text, "--seeds")) {
    const std::size_t dash = item.find('-');
    std::uint64_t a = 0, b = 0;
    if (dash == std::string::npos) {
      if (!parse_u64(item, a))
        throw BadInput("--seeds '" + text + "': '" + item + "' is not a seed (expected A-B, or A,B,C; integers >= 0)");
      out.push_back(a);
      continue;
    }
    if (!parse_u64(std::string_view(item).substr(0, dash), a) || !parse_u64(std::string_view(item).substr(dash + 1), b))
      throw BadInput("--seeds '" + text + "': '" + item + "' is not a range (expected A-B with integers 0 <= A <= B)");
    if (b < a) throw BadInput("--seeds '" + text + "': the range " + item + " ends below its start (expected A <= B)");
    if (b - a >= 100000)
      throw BadInput("--seeds '" + text + "': the range " + item + " is too long (over 100000 seeds)");
    for (std::uint64_t s = a;; ++s) {
      out.push_back(s);
      if (s == b) break;
    }
  }
  return out;
}

ProtocolOptions protocol_options(const ModelCliOptions& c) {
  ProtocolOptions o;
  o.model = c.model;
  o.profiles = split_list(c.profiles, "--profile");
  o.strategies = split_list(c.strategies, "--strategies");
  o.prompts = c.prompts;
  o.tokenizer = c.tokenizer;
  o.n = positive(c.n, "--n");
  o.clamp_n = !c.n_given;
  o.sample_seed = c.sample_seed;
  o.seeds = parse_seeds(c.seeds);
  o.max_new_tokens = positive(c.max_new_tokens, "--max-new-tokens");
  o.shots = positive(c.shots, "--shots", true);
  o.top_k = positive(c.top_k, "--top-k");
  o.top_p = c.top_p;
  o.temperature = c.temperature;
  o.layer_drift = !c.no_layer_drift;
  if (c.scenario == "all") {
    o.scenarios.clear();
    for (engine::Scenario s : engine::all_scenarios()) o.scenarios.push_back(engine::scenario_name(s));
  } else if (!c.scenario.empty()) {
    o.scenarios = split_list(c.scenario, "--scenario");
  }
  if (c.out.empty()) throw BadInput("--out must name a directory");
  o.out = c.out;
  o.resume = c.resume;
  o.shard = choose_shard(c.shard, c.shard_given, std::getenv).shard;  // --shard, else a Slurm array task's
  o.fixtures_dir = KVCONF_FIXTURES_DIR;
  o.shared_dir = KVCONF_SHARED_DIR;
  return o;
}

CLI::App* add_model_command(CLI::App& app, ModelCliOptions& o) {
  auto* m = app.add_subcommand(
      "model",
      "Run the seed paper's protocol on one model: for every profile x strategy x seed x prompt, the cache-ON /\n"
      "cache-OFF pair free-running (FlipsAreNearTies rule) and teacher-forced, GSM8K correctness of both paths.\n"
      "Results: OUT/pairs.jsonl (one record per pair, appended as it finishes), OUT/manifest.json, and the report\n"
      "(OUT/report.html, report.md, report.json, junit.xml). Exit 0: every\n"
      "pair's rules pass; 1: a rule failed; 2: bad input. Prompt format and sampling: docs/PROTOCOL.md.");
  m->add_option("--model", o.model,
                "fixture:NAME (llama2-tiny, mistral-tiny, gemma2-tiny, stories260K, smollm2-135m), a checkpoint\n"
                "folder, its config.json, or a llama2.c .bin");
  m->add_option("--profile", o.profiles,
                "Numerics profiles, comma-separated (fp16-eager, fp16-flash2, bf16-eager, fp32, ...)")
      ->capture_default_str();
  m->add_option("--strategies", o.strategies, "Decoding strategies, comma-separated: greedy, topk, topp")
      ->capture_default_str();
  m->add_option("--prompts", o.prompts,
                "gsm8k:FILE (GSM8K test.jsonl: few-shot prompts, gold answers) or ids:FILE (a prompt-set file of\n"
                "token ids). Default: a fixture's own prompt set; for a path, gsm8k: the shared GSM8K test set");
  m->add_option("--tokenizer", o.tokenizer,
                "SentencePiece tokenizer.model for gsm8k prompts and answers, or a byte-level tokenizer.json for answers\n"
                "(default: the model folder's tokenizer.json, else the shared LLaMA-2 one)");
  m->add_option("--n", o.n, "Prompts sampled without replacement (default 700; without --n, at most all there are)")
      ->each([&o](const std::string&) { o.n_given = true; });
  m->add_option("--sample-seed", o.sample_seed, "Seed of the prompt sample (SplitMix64 Fisher-Yates)")
      ->capture_default_str();
  m->add_option("--seeds", o.seeds, "Sample seeds of the per-step draws: A-B or A,B,C")->capture_default_str();
  m->add_option("--max-new-tokens", o.max_new_tokens, "Decode steps per path")->capture_default_str();
  m->add_option("--shots", o.shots, "GSM8K few-shot exemplars before each question")->capture_default_str();
  m->add_option("--top-k", o.top_k, "k of topk")->capture_default_str();
  m->add_option("--top-p", o.top_p, "p of topp")->capture_default_str();
  m->add_option("--temperature", o.temperature, "Temperature of topk and topp (> 0)")->capture_default_str();
  m->add_flag("--no-layer-drift", o.no_layer_drift, "Do not record per-layer drift (teacher-forced)");
  m->add_option("--out", o.out, "Results directory")->capture_default_str();
  m->add_flag("--resume", o.resume, "Continue the run in --out: finished pairs are not redone (options must match)");
  m->add_option("--experiment", o.experiment,
                "Run experiments instead of the protocol: all, or a comma-separated list of decision_boundary,\n"
                "residual_patching, kv_patching, kv_buildup, gqa_amplification, kv_injection, mitigations,\n"
                "flip_attribution (docs/EXPERIMENTS.md). Results:\n"
                "OUT/experiments.jsonl and the report with each experiment's findings, plots and rules");
  m->add_option(
      "--scenario", o.scenario,
      "Scenarios instead of cache ON vs OFF alone: all, or a comma-separated list of cache, prefix, batch,\n"
      "chunked, refill, restore, preempt, kv_dtype (docs/SCENARIOS.md; kv_dtype keeps side A's cache in q8_0).\n"
      "Each pair runs the scenario's two sides free-running and is filed under the profile\n"
      "<profile>+<scenario>; cache is the protocol's own pair");
  m->add_option("--shard", o.shard,
                "Run only shard I of N (I/N, 0 <= I < N) of the fixed work order (default: the Slurm array task's,\n"
                "SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN of SLURM_ARRAY_TASK_COUNT, when set; docs/SLURM.md)")
      ->capture_default_str()
      ->each([&o](const std::string&) { o.shard_given = true; });
  return m;
}

nlohmann::json model_report_meta(const std::string& command, const ProtocolOptions& o) {
  nlohmann::json meta = provenance(command);
  meta.update({{"model", o.model},
               {"shard", o.shard.str()},
               {"max_new_tokens", o.max_new_tokens},
               {"n", o.n},
               {"sample_seed", o.sample_seed}});
  return meta;
}

int model_command(const ModelCliOptions& c) {
  if (!c.experiment.empty() && !c.scenario.empty()) {
    std::fprintf(stderr, "kvconf model: --experiment and --scenario cannot be combined (run them separately)\n");
    return 2;
  }
  if (!c.experiment.empty()) return experiment_command(c);
  ProtocolResult r;
  std::size_t failed_rules = 0;
  try {
    const ProtocolOptions o = protocol_options(c);
    if (const std::string from = choose_shard(c.shard, c.shard_given, std::getenv).source; !from.empty())
      std::printf("kvconf model: shard %s from %s\n", o.shard.str().c_str(), from.c_str());
    ProgressBar bar("kvconf model");
    r = run_protocol(o, [&bar](const Progress& p) { bar.update(p); });
    bar.finish();
    std::printf("kvconf model: %zu pairs (%zu run now, %zu resumed) in %s/pairs.jsonl\n", r.records.size(), r.ran,
                r.resumed, o.out.c_str());
    print_summary(r);
    // The report of this folder (this shard's pairs; `kvconf report --in` merges shards).
    reports::ReportInput in;
    in.title = "kvconf model " + o.model;
    in.pairs = r.records;
    in.meta = model_report_meta("kvconf model", o);
    failed_rules = write_report_with_summary(in, o.out);
  } catch (const std::exception& e) {
    return print_failure("kvconf model", e);
  }
  const std::size_t failed = print_failed_pairs(r.records, "kvconf model");
  if (failed_rules) std::printf("kvconf model: %zu conformance rules failed\n", failed_rules);
  return (failed || failed_rules) ? 1 : 0;
}

}  // namespace kvconf::tools
