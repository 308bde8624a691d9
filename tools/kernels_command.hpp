// `kvconf kernels`: the kernel sweep alone (conformance/sweep.hpp) over every CPU kernel, records appended to
// DIR/kernels.jsonl (resumable, shardable), and a table of oracle errors and cache-ON vs cache-OFF differences.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <string>
#include <vector>

namespace kvconf::tools {

struct KernelsCliOptions {
  std::string filter;                        // keep items whose "kernel|case_id" contains this text
  bool quick = false;                        // the standard shapes of kvconf run only
  std::filesystem::path out = "kvconf-out";  // DIR: DIR/kernels.jsonl, DIR/manifest.json ("kernels" member)
  bool resume = false;                       // continue DIR/kernels.jsonl; its finished items are not redone
  std::string shard = "0/1";                 // I/N: items i with i % N == I
  bool list = false;                         // print the plan (this shard's items) and exit
  std::string seed;                          // one seed for every rule (empty: per case; KVCONF_SEED also overrides)
  std::vector<std::string> plugins;          // --plugin LIB.so (repeatable): sweep these plugins' kernels instead
};

CLI::App* add_kernels_command(CLI::App& app, KernelsCliOptions& o);
// 0 every rule passed, 1 a rule failed, 2 bad input (filter matching nothing, bad shard, unwritable out, resume of a
// different sweep).
int kernels_command(const KernelsCliOptions& o);

}  // namespace kvconf::tools
