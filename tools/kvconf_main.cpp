// The `kvconf` command-line program (first cut: --version, --help, `run` self-checks).
#include <CLI/CLI.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  CLI::App app{"kvconf — KV-cache equivalence conformance suite"};
  app.set_version_flag("--version", std::string("kvconf ") + KVCONF_VERSION);
  app.require_subcommand(0, 1);
  auto* run = app.add_subcommand("run", "Run the main job on the built-in default");
  CLI11_PARSE(app, argc, argv);
  if (run->parsed()) {
    std::puts("kvconf run: not implemented yet");
    return 0;
  }
  std::puts(app.help().c_str());
  return 0;
}
