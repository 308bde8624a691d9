// The CPU kernel list (kernels/cpu/kernels.def) agrees with the sources and the registry: every registering function
// a kernels/cpu/*.cpp file defines is one line of the list and every line names a function one file defines (CMake
// globs the folder, so a file is built as soon as it exists, and registers as soon as its line is in the list).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "kvconf/kernels/registry.hpp"

namespace kvconf::kernels {
namespace {

const std::filesystem::path kCpuDir = std::filesystem::path(KVCONF_SOURCE_DIR) / "kernels" / "cpu";

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CpuKernelList, ListAndSourcesAgree) {
  // function -> the files defining it
  std::map<std::string, std::set<std::string>> defined;
  const std::regex def(R"(\nvoid (register_\w+)\(Registry& r\) \{)");
  for (const auto& e : std::filesystem::directory_iterator(kCpuDir)) {
    // register_cpu.cpp is the list's expansion (register_cpu_kernels), not a kernel file.
    if (e.path().extension() != ".cpp" || e.path().filename() == "register_cpu.cpp") continue;
    const std::string text = read(e.path());
    for (std::sregex_iterator it(text.begin(), text.end(), def), end; it != end; ++it)
      defined[(*it)[1]].insert(e.path().filename().string());
  }
  ASSERT_FALSE(defined.empty()) << "no register_*(Registry& r) definitions under " << kCpuDir;
  std::map<std::string, int> listed;
  const std::string list = read(kCpuDir / "kernels.def");
  const std::regex line(R"(\nKVCONF_CPU_KERNELS\((\w+)\))");
  for (std::sregex_iterator it(list.begin(), list.end(), line), end; it != end; ++it) ++listed[(*it)[1]];
  for (const auto& [fn, files] : defined) {
    EXPECT_EQ(files.size(), 1u) << fn << " is defined in more than one file";
    EXPECT_EQ(listed[fn], 1) << fn << " (" << *files.begin() << ") must be exactly one line of kernels.def";
  }
  for (const auto& [fn, n] : listed)
    EXPECT_TRUE(defined.count(fn)) << "kernels.def lists " << fn << ", which no file defines";
}

// The registry holds what the list registers: kernels of every kind, all named cpu.<kind>.*, in the list's order
// (GEMMs, then norms, then attention).
TEST(CpuKernelList, RegistryFollowsTheList) {
  const Registry r = cpu_registry();
  ASSERT_FALSE(r.gemm().empty());
  ASSERT_FALSE(r.norm().empty());
  ASSERT_FALSE(r.attention().empty());
  for (const auto& k : r.gemm()) EXPECT_EQ(k.info.name.rfind("cpu.gemm.", 0), 0u) << k.info.name;
  for (const auto& k : r.norm()) EXPECT_EQ(k.info.name.rfind("cpu.norm.", 0), 0u) << k.info.name;
  for (const auto& k : r.attention()) EXPECT_EQ(k.info.name.rfind("cpu.attn.", 0), 0u) << k.info.name;
  const auto names = r.names();
  EXPECT_EQ(names.front(), r.gemm().front().info.name);
  EXPECT_EQ(names.back(), r.attention().back().info.name);
}

}  // namespace
}  // namespace kvconf::kernels
