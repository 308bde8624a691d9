// The plugin backend (kernels/plugin): kernels of external shared libraries speaking the C ABI of
// include/kvconf/plugin.h, registered as plugin.<lib>.<kernel> (backend "plugin") and described to the bounds as
// black boxes (black_box.hpp). The host process never loads a plugin: each library runs in its own worker process
// (kvconf_plugin_worker), so a crash, a hang or a stray write inside a kernel becomes a failed case naming the kernel
// (KernelFailure), never a dead run. docs/PLUGIN.md.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconf/kernels/kernel_failure.hpp"
#include "kvconf/kernels/registry.hpp"

namespace kvconf::kernels {

// A plugin refused at load (missing file or symbol, wrong ABI version, bad descriptor): one line naming the plugin
// and what is wrong, e.g. "plugin ./libx.so: kernel[1] 'gemm': field in = 7, expected KVCONF_FP32 (1), ...".
struct PluginError : std::runtime_error {
  explicit PluginError(const std::string& what) : std::runtime_error(what) {}
};

// A kernel that broke the ABI's contract during a run (changed its output tensor's descriptor, returned the wrong
// number of bytes): the plugin is wrong, not the numerics. Not a KernelFailure: `kvconf kernels` exits 2 on it.
struct PluginAbiViolation : std::runtime_error {
  explicit PluginAbiViolation(const std::string& what) : std::runtime_error(what) {}
};

struct PluginOptions {
  double timeout_s = 10.0;  // per call (and for loading); KVCONF_PLUGIN_TIMEOUT_S overrides (plugin_options())
  std::string worker;       // the worker program; empty: plugin_worker_path()
};

// Defaults, with KVCONF_PLUGIN_TIMEOUT_S applied (throws PluginError on a value that is not a positive number).
PluginOptions plugin_options();

// The worker program: $KVCONF_PLUGIN_WORKER, else the one built in this tree, else kvconf_plugin_worker next to the
// running program (or in ../libexec). Throws PluginError when none exists.
std::string plugin_worker_path();

// Loads one plugin (in a fresh worker) and adds its kernels to r. Throws PluginError when the plugin is refused.
// Workers die with the thread that started them (PR_SET_PDEATHSIG, so a hung kernel never outlives kvconf): load
// plugins, and make the calls that may restart a worker, from a thread that lives as long as the registry (main).
void register_plugin_kernels(Registry& r, const std::filesystem::path& lib, const PluginOptions& o = plugin_options());

// A registry holding the kernels of every listed plugin, in order.
Registry plugin_registry(const std::vector<std::string>& libs, const PluginOptions& o = plugin_options());

// The plugins of KVCONF_PLUGINS (colon-separated paths; empty entries ignored), or {fallback} when it is unset or
// empty (and fallback is not empty).
std::vector<std::string> plugins_from_env(const std::string& fallback = {});

// "plugin.<lib>.": the registry-name prefix of a library's kernels (<lib>: its file name without a leading "lib"
// and everything from the first '.').
std::string plugin_prefix(const std::filesystem::path& lib);

}  // namespace kvconf::kernels
