// Helpers of the crash-safety tests (crash_safety_test.cpp): kvconf as a child process killed with SIGKILL after a
// delay, and the checks of what it leaves on disk (result stores, report files).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace kvconf::crash {

namespace fs = std::filesystem;

struct Exit {
  bool killed = false;  // we sent SIGKILL before it ended
  int status = -1;      // exit status when it ended by itself (-1 when killed or ended by a signal)
  int signal = 0;       // the signal that ended it, if any
  double seconds = 0.0;
  double watch_seen = -1.0;  // when Launch::watch first existed (seconds after the start), -1 if never
};

struct Launch {
  Launch(std::vector<std::string> a, fs::path lg, fs::path e = {}, double kill = -1.0)
      : args(std::move(a)), log(std::move(lg)), err(std::move(e)), kill_after(kill) {}
  std::vector<std::string> args;                         // after the kvconf executable
  fs::path log;                                          // stdout and stderr
  fs::path err;                                          // stderr alone (empty: with stdout in `log`)
  double kill_after = -1.0;                              // seconds; < 0: never
  double timeout = 600.0;                                // SIGKILL and report a hang past this
  std::vector<std::pair<std::string, std::string>> env;  // added to the environment
  std::vector<std::string> wrapper;                      // programs before kvconf (e.g. unshare ...)
  fs::path watch;                                        // a file whose appearance is timed (Exit::watch_seen)
  // Progress-driven kill: once `kill_file` holds `kill_lines` newlines, SIGKILL `kill_extra` seconds later (used
  // instead of kill_after when kill_lines > 0, so the kill lands mid-run however fast or slow the machine is).
  fs::path kill_file;
  std::size_t kill_lines = 0;
  double kill_extra = 0.0;
};

// The number of '\n' in `file` (0 if absent).
std::size_t count_lines(const fs::path& file);

// Runs KVCONF_EXE with `l.args`, killing it with SIGKILL after `l.kill_after` seconds (or once `l.kill_file` has
// grown to `l.kill_lines` lines, plus `l.kill_extra` seconds) unless it ends first.
Exit run_kvconf(const Launch& l);

std::string read_text(const fs::path& file);

// A JSONL result store: its records by key, each without timing fields. `problems` lists what must never be seen:
// a duplicate key, a line that does not parse other than a torn last one.
struct Store {
  std::map<std::string, nlohmann::json> records;
  std::vector<std::string> problems;
  bool torn_tail = false;  // the last line was cut (only a kill during its write() could do that)
};
using KeyOf = std::function<std::string(const nlohmann::json&)>;
Store read_store(const fs::path& file, const KeyOf& key_of);

// `j` without its "meta" member (provenance: date, host, command line) and without any "seconds" member at any depth.
nlohmann::json without_timing(nlohmann::json j);

// The report and manifest files under `dir` (recursively) that are not whole: a .json file that does not parse, a
// report.md / report.html / junit.xml that does not end with the last line of the same file of `reference_dir`.
std::vector<std::string> torn_reports(const fs::path& dir, const fs::path& reference_dir);

// Files under `dir` named like write_file_atomic's temporaries (NAME.tmp.XXXXXX): left by a kill between mkstemp
// and rename.
std::size_t temp_leftovers(const fs::path& dir);

// Every regular file under `dir` with its content (to show a refused run changed nothing).
std::map<std::string, std::string> snapshot(const fs::path& dir);

}  // namespace kvconf::crash
