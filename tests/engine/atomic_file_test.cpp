// Unit tests of the atomic report writer used by `kvconf run`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kvconf/engine/atomic_file.hpp"

namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(AtomicFile, WritesAndReplacesWithoutLeavingTemporaries) {
  const fs::path dir = fs::temp_directory_path() / "kvconf_atomic_test";
  fs::remove_all(dir);
  kvconf::engine::write_file_atomic(dir / "sub" / "a.json", "first");
  EXPECT_EQ(slurp(dir / "sub" / "a.json"), "first");
  kvconf::engine::write_file_atomic(dir / "sub" / "a.json", "second");
  EXPECT_EQ(slurp(dir / "sub" / "a.json"), "second");
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir / "sub")) files += e.is_regular_file();
  EXPECT_EQ(files, 1) << "a temporary file was left behind";
  fs::remove_all(dir);
}

TEST(AtomicFile, UnwritablePathThrowsNamingThePath) {
  // A path under a regular file cannot be created.
  const fs::path file = fs::temp_directory_path() / "kvconf_atomic_blocker";
  kvconf::engine::write_file_atomic(file, "x");
  try {
    kvconf::engine::write_file_atomic(file / "report.json", "y");
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("kvconf_atomic_blocker"), std::string::npos) << e.what();
  }
  fs::remove(file);
}

}  // namespace

// Reports and baselines are for others to read: the file ends up rw-r--r--, not mkstemp's private 0600.
TEST(AtomicFile, WrittenFileIsReadableByOthers) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "kvconf_atomic_perm_test";
  fs::remove_all(dir);
  kvconf::engine::write_file_atomic(dir / "report.md", "# r\n");
  const fs::perms p = fs::status(dir / "report.md").permissions();
  EXPECT_NE(p & fs::perms::others_read, fs::perms::none);
  EXPECT_NE(p & fs::perms::group_read, fs::perms::none);
  fs::remove_all(dir);
}
