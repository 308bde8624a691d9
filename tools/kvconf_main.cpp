// The `kvconf` command-line program: version, help, and `run` (the main job).
#include <CLI/CLI.hpp>

#include <cstdio>

#include "run_command.hpp"

int main(int argc, char** argv) {
  CLI::App app{"kvconf — KV-cache equivalence conformance suite.\n"
               "Checks that decoding with a KV cache computes what a full recompute computes, and tells\n"
               "honest FP16 rounding effects from bugs with an MPFR oracle and a-priori error bounds."};
  app.set_version_flag("--version", std::string("kvconf ") + KVCONF_VERSION);
  app.require_subcommand(0, 1);

  kvconf::tools::RunOptions run_opts;
  auto* run = app.add_subcommand("run", "Run the main job on the built-in default (no network needed)");
  run->add_option("--out", run_opts.out, "Report directory")->capture_default_str();
  run->add_option("--filter", run_opts.filter, "Run only checks whose name contains this text");
  run->add_flag("--list", run_opts.list, "List the checks and exit");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return (rc == 0) ? 0 : 2;  // bad command line: status 2
  }
  if (run->parsed()) return kvconf::tools::run_command(run_opts);
  std::fputs(app.help().c_str(), stdout);
  return 0;
}
