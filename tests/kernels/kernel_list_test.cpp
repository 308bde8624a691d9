// The kernel lists agree with the sources and the registries. CPU (kernels/cpu/kernels.def): every registering
// function a kernels/cpu/*.cpp file defines is one line of the list and every line names a function one file defines
// (CMake globs the folder, so a file is built as soon as it exists, and registers as soon as its line is in the
// list). CUDA (kernels/cuda/kernels.def): every line's attention_<stem>.cpp exists and defines
// register_cuda_attention_<stem>, every file that defines one is a line, and gpu_registry() holds exactly
// cuda.attn.<stem>.{f16,f32} in the list's order (CMake builds the files the list names, so a file without a line
// is never built).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kvconf/kernels/gpu.hpp"
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

const std::filesystem::path kCudaDir = std::filesystem::path(KVCONF_SOURCE_DIR) / "kernels" / "cuda";

// The stems of kernels/cuda/kernels.def, in order.
std::vector<std::string> cuda_stems() {
  std::vector<std::string> stems;
  const std::string list = read(kCudaDir / "kernels.def");
  const std::regex line(R"(\nKVCONF_CUDA_KERNELS\((\w+)\))");
  for (std::sregex_iterator it(list.begin(), list.end(), line), end; it != end; ++it) stems.push_back((*it)[1]);
  return stems;
}

TEST(CudaKernelList, ListAndSourcesAgree) {
  const std::vector<std::string> stems = cuda_stems();
  ASSERT_FALSE(stems.empty()) << "no KVCONF_CUDA_KERNELS(stem) lines in " << kCudaDir / "kernels.def";
  const std::regex def(R"(\nvoid register_cuda_attention_(\w+)\(Registry& r\) \{)");
  std::map<std::string, std::set<std::string>> defined;  // stem -> files defining its function
  for (const auto& e : std::filesystem::directory_iterator(kCudaDir)) {
    if (e.path().extension() != ".cpp") continue;
    const std::string text = read(e.path());
    for (std::sregex_iterator it(text.begin(), text.end(), def), end; it != end; ++it)
      defined[(*it)[1]].insert(e.path().filename().string());
  }
  std::map<std::string, int> listed;
  for (const auto& s : stems) ++listed[s];
  for (const auto& [stem, n] : listed) {
    EXPECT_EQ(n, 1) << stem << " is listed " << n << " times";
    ASSERT_TRUE(defined.count(stem)) << "kernels.def lists " << stem << ", but no file defines register_cuda_attention_"
                                     << stem;
    EXPECT_EQ(defined[stem], std::set<std::string>{"attention_" + stem + ".cpp"})
        << "register_cuda_attention_" << stem << " must be defined in attention_" << stem << ".cpp alone";
  }
  for (const auto& [stem, files] : defined)
    EXPECT_TRUE(listed.count(stem)) << *files.begin() << " defines register_cuda_attention_" << stem
                                    << ", which kernels.def does not list (CMake would not build it)";
}

TEST(CudaKernelList, RegistryFollowsTheList) {
  std::vector<std::string> expected;
  for (const auto& s : cuda_stems())
    for (const char* f : {"f16", "f32"}) expected.push_back("cuda.attn." + s + "." + f);
  const Registry r = gpu_registry();
  std::vector<std::string> got;
  for (const auto& k : r.attention()) got.push_back(k.info.name);
  EXPECT_EQ(got, expected);
}

}  // namespace
}  // namespace kvconf::kernels
