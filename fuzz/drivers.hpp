// The fuzz drivers: one function per kvconf input parser, fed raw bytes the way the CLI reaches that parser (written
// to a per-process temporary file where the parser takes a path). Shared by the libFuzzer harnesses (fuzz/*_fuzz.cpp)
// and by the regression test of the normal build (tests/fuzz_regressions), which replays fuzz/corpus and
// fuzz/regressions through the same code without clang.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvconf::fuzz {

using Bytes = std::span<const std::uint8_t>;

// One driver: returns normally on input the parser accepts; throws the parser's documented error type otherwise.
struct Driver {
  const char* name;                        // the harness name: fuzz/corpus/<name>, fuzz/regressions/<name>
  void (*run)(Bytes);                      // drives the parser
  bool (*accepts)(const std::exception&);  // true for the documented error type(s) of this parser
  const char* error_type;                  // for messages: "engine::LoadError", "protocol::BadInput", ...
};

// Every driver, in the order of docs/FUZZING.md.
const std::vector<Driver>& drivers();
const Driver& driver(std::string_view name);  // std::invalid_argument for an unknown name

// The scratch folder of this process (/dev/shm/kvconf-fuzz-<pid>, or under TMPDIR when /dev/shm is absent); created on
// first use, removed at exit.
const std::filesystem::path& scratch_dir();
// Writes bytes to scratch_dir()/name (replacing it) and returns the path.
std::filesystem::path write_scratch(const std::string& name, Bytes data);
std::filesystem::path write_scratch(const std::string& name, std::string_view data);

// Runs one input through a driver: 0 when it was accepted or rejected with the documented error type. Any other
// exception is a finding: its type and message go to stderr and the process aborts (libFuzzer records the input).
int run_one(const Driver& d, const std::uint8_t* data, std::size_t size);

// The parts of an input separated by lines holding only `sep` ("=====" by default): the report and checkpoint
// harnesses build several files from one input this way.
std::vector<std::string_view> split_parts(std::string_view all, std::string_view sep = "\n=====\n");

}  // namespace kvconf::fuzz
