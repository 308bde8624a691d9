// The `kvconf` command-line program: version, help, and its commands (run, model, kernels, report, golden, generate).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "check_command.hpp"
#include "generate_command.hpp"
#include "model_command.hpp"
#include "golden_command.hpp"
#include "kernels_command.hpp"
#include "report_command.hpp"
#include "run_command.hpp"

namespace {

int kvconf_main(int argc, char** argv) {
  CLI::App app{
      "kvconf — KV-cache equivalence conformance suite.\n"
      "Checks that decoding with a KV cache computes what a full recompute computes, and tells\n"
      "honest FP16 rounding effects from bugs with an MPFR oracle and a-priori error bounds."};
  app.set_version_flag("--version", std::string("kvconf ") + KVCONF_VERSION);
  app.require_subcommand(0, 1);

  kvconf::tools::RunOptions run_opts;
  auto* run = kvconf::tools::add_run_command(app, run_opts);
  kvconf::tools::ReportCliOptions report_opts;
  auto* report = kvconf::tools::add_report_command(app, report_opts);

  kvconf::tools::KernelsCliOptions kernels_opts;
  auto* kernels_cmd = kvconf::tools::add_kernels_command(app, kernels_opts);
  kvconf::tools::GoldenCliOptions golden_opts;
  auto* golden_cmd = kvconf::tools::add_golden_command(app, golden_opts);

  kvconf::tools::GenerateCliOptions gen_opts;
  auto* gen = app.add_subcommand("generate", "Decode N tokens from a model under a numerics profile, cache on or off");
  gen->add_option("--model", gen_opts.model, "Checkpoint folder, config.json (or its folder), or llama2.c .bin");
  gen->add_option("--profile", gen_opts.profile, "Numerics profile (fp32, fp16-eager, fp16-invariant, ...)")
      ->capture_default_str();
  auto* ids_opt = gen->add_option("--prompt-ids", gen_opts.prompt_ids, "Prompt token ids, e.g. \"1 2 3\"")
                      ->expected(0, 1);  // an empty prompt reaches generate, which names the problem
  auto* text_opt =
      gen->add_option("--prompt", gen_opts.prompt, "Prompt text (needs --tokenizer; BOS added)")->expected(0, 1);
  gen->add_option("--tokenizer", gen_opts.tokenizer,
                  "SentencePiece tokenizer.model (encodes --prompt, decodes output)");
  gen->add_option("--steps", gen_opts.steps, "Tokens to generate (>= 1)")->capture_default_str();
  gen->add_option("--cache", gen_opts.cache, "KV cache: on (prefill + decode) or off (recompute every step)")
      ->capture_default_str();
  gen->add_option("--strategy", gen_opts.strategy, "greedy, topk or topp")->capture_default_str();
  gen->add_option("--top-k", gen_opts.top_k, "k of topk")->capture_default_str();
  gen->add_option("--top-p", gen_opts.top_p, "p of topp")->capture_default_str();
  gen->add_option("--temperature", gen_opts.temperature, "Sampling temperature (> 0)")->capture_default_str();
  gen->add_option("--seed", gen_opts.seed, "Seed of the per-step draws")->capture_default_str();
  gen->add_flag("--json", gen_opts.json, "Print one JSON object");

  kvconf::tools::ModelCliOptions model_opts;
  auto* model = kvconf::tools::add_model_command(app, model_opts);
  kvconf::tools::CheckCliOptions check_opts;
  auto* check = kvconf::tools::add_check_command(app, check_opts);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0 && gen->parsed()) {  // one line, as for every other bad input of generate
      std::fprintf(stderr, "kvconf generate: %s\n", e.what());
      return 2;
    }
    if (e.get_exit_code() != 0 && check->parsed()) {
      std::fprintf(stderr, "kvconf check: %s\n", e.what());
      return 2;
    }
    if (e.get_exit_code() != 0 && model->parsed()) {
      std::fprintf(stderr, "kvconf model: %s\n", e.what());
      return 2;
    }
    const int rc = app.exit(e);
    return (rc == 0) ? 0 : 2;  // bad command line: status 2
  }
  if (run->parsed()) return kvconf::tools::run_command(run_opts);
  if (report->parsed()) return kvconf::tools::report_command(report_opts);
  if (kernels_cmd->parsed()) return kvconf::tools::kernels_command(kernels_opts);
  if (golden_cmd->parsed()) return kvconf::tools::golden_command(golden_opts);
  if (gen->parsed()) {
    gen_opts.prompt_ids_given = ids_opt->count() > 0;
    gen_opts.prompt_given = text_opt->count() > 0;
    return kvconf::tools::generate_command(gen_opts);
  }
  if (model->parsed()) return kvconf::tools::model_command(model_opts);
  if (check->parsed()) return kvconf::tools::check_command(check_opts);
  std::fputs(app.help().c_str(), stdout);
  return 0;
}

}  // namespace

// Every command reports its own errors; an exception that still escapes one (out of memory, a CLI11 set-up error) is
// printed on one line with status 2 instead of std::terminate's abort.
int main(int argc, char** argv) {
  try {
    return kvconf_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvconf: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "kvconf: unknown exception\n");
  }
  return 2;
}
