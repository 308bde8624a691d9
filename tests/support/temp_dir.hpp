// A fresh, empty folder per test case under a per-process base that is removed when the test program exits.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace kvconf::test {

// <tmp>/<prefix>_<pid>/<current test name>, emptied and created on each call.
inline std::filesystem::path temp_dir(const std::string& prefix) {
  namespace fs = std::filesystem;
  struct Base {
    fs::path path;
    ~Base() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static Base base{fs::temp_directory_path() / (prefix + "_" + std::to_string(::getpid()))};
  const fs::path d = base.path / ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace kvconf::test
