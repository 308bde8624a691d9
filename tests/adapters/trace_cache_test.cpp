// The adapters' trace caches (trace_dirs.hpp) are keyed by what made them: a folder is reused under the key it was
// made with and written again under any other (a changed adapter source, engine, fixture or option), and a key is
// made of the files' fingerprints, which change with a file's content.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "trace_dirs.hpp"

namespace fs = std::filesystem;
using kvconf::testing::fingerprint;
using kvconf::testing::folder_fingerprint;
using kvconf::testing::write_once;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("kvconf-trace-cache-" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& f, const std::string& text) { std::ofstream(f, std::ios::binary) << text; }

// The number of lines in `f` (the times the command ran).
int runs(const fs::path& f) {
  std::ifstream in(f);
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

}  // namespace

TEST(TraceCache, FolderIsWrittenAgainUnderAnotherKey) {
  const fs::path root = scratch("keys"), dir = root / "traces", count = root / "count";
  // The "adapter": makes its output folder and counts its runs.
  const auto command = [&](const fs::path& tmp) {
    return "mkdir -p '" + tmp.string() + "' && (echo run >> '" + count.string() + "')";
  };
  std::string why;
  ASSERT_EQ(write_once(dir, &why, command, "adapter:1"), dir) << why;
  EXPECT_EQ(runs(count), 1);
  EXPECT_EQ(write_once(dir, &why, command, "adapter:1"), dir);
  EXPECT_EQ(runs(count), 1) << "the same key must reuse the folder";
  EXPECT_EQ(write_once(dir, &why, command, "adapter:2"), dir);
  EXPECT_EQ(runs(count), 2) << "another key must write the folder again";
  EXPECT_EQ(write_once(dir, &why, command, "adapter:2"), dir);
  EXPECT_EQ(runs(count), 2);
  // A folder without a key file (an older kvconf's cache) is not trusted.
  fs::remove(dir / kvconf::testing::kKeyFile);
  EXPECT_EQ(write_once(dir, &why, command, "adapter:2"), dir);
  EXPECT_EQ(runs(count), 3);
  fs::remove_all(root.parent_path());
}

TEST(TraceCache, FingerprintsFollowContent) {
  const fs::path root = scratch("prints");
  write(root / "a.py", "print(1)\n");
  write(root / "b.py", "print(2)\n");
  write(root / "notes.txt", "x");
  const std::string a = fingerprint(root / "a.py"), folder = folder_fingerprint(root, ".py");
  EXPECT_EQ(fingerprint(root / "a.py"), a);
  write(root / "a.py", "print(3)\n");  // same size, other content
  EXPECT_NE(fingerprint(root / "a.py"), a);
  EXPECT_NE(folder_fingerprint(root, ".py"), folder) << "a changed module must change the folder's key";
  const std::string py = folder_fingerprint(root, ".py");
  write(root / "notes.txt", "y");
  EXPECT_EQ(folder_fingerprint(root, ".py"), py) << "files of another suffix are not the adapter's";
  write(root / "c.py", "");
  EXPECT_NE(folder_fingerprint(root, ".py"), py) << "a new module must change the folder's key";
  EXPECT_NE(fingerprint(root / "missing.py"), fingerprint(root / "c.py"));
  fs::remove_all(root.parent_path());
}
