// kvconf_make_random_checkpoint: writes a full-size random-weight checkpoint folder with a published config
// (LLaMA-2-7B, Mistral-7B-v0.3, Gemma-2-2B), fp16 weights, ~2 GB shards, seeded — for the GPU engine's real shapes.
// Usage: kvconf_make_random_checkpoint --arch llama2-7b --out DIR --seed 1 [--layers N] [--threads T]
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <exception>

#include "random_checkpoint.hpp"

int main(int argc, char** argv) {
  try {  // everything, CLI11's set-up included: no exception reaches std::terminate
    kvconf::bench::RandomCheckpointOptions o;
    CLI::App app{"Write a full-size random-weight checkpoint (published config, fp16, seeded, sharded at ~2 GB)"};
    app.add_option("--arch", o.arch, "llama2-7b | mistral-7b-v0.3 | gemma2-2b")
        ->required()
        ->check(CLI::IsMember(kvconf::bench::random_checkpoint_archs()));
    app.add_option("--out", o.out, "output folder (created)")->required();
    app.add_option("--seed", o.seed, "weight seed")->required();
    app.add_option("--layers", o.layers, "num_hidden_layers (default: the published count)");
    app.add_option("--max-shard-bytes", o.max_shard_bytes, "data bytes per shard (default 2e9)");
    app.add_option("--threads", o.threads, "generator threads (default: all cores)");
    CLI11_PARSE(app, argc, argv);
    const auto t0 = std::chrono::steady_clock::now();
    const kvconf::bench::CheckpointPlan plan = kvconf::bench::write_random_checkpoint(o);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: %zu tensors, %.3f GB fp16 in %zu shard(s), %.1f s\n", o.out.string().c_str(), plan.tensors.size(),
                static_cast<double>(plan.total_bytes) * 1e-9, plan.shards.size(), s);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvconf_make_random_checkpoint: %s\n", e.what());
    return 2;
  }
}
