// Results that survive interruption: a JSONL file appended one record per line, each line flushed and fsync'ed
// before the next piece of work starts, so a run killed at any point loses at most the record being written. With
// resume, the finished records are read back (a torn last line from a kill is dropped and reported) and their keys
// are not redone. Also the deterministic work split --shard I/N.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace kvconf::protocol {

class JsonlStore {
 public:
  // Opens `file` for appending. Without `resume`, a non-empty existing file is BadInput ("... exists: pass --resume
  // to continue it, or choose another --out"). With `resume`, each complete line is parsed and keyed with `key_of`
  // (a line that does not parse, other than a torn last line, is BadInput naming file and line). The file is
  // locked (flock) while the store lives: a second store on it, in this or another process, is BadInput.
  JsonlStore(std::filesystem::path file, bool resume, std::function<std::string(const nlohmann::json&)> key_of);
  ~JsonlStore();
  JsonlStore(const JsonlStore&) = delete;
  JsonlStore& operator=(const JsonlStore&) = delete;

  bool has(const std::string& key) const { return keys_.count(key) != 0; }
  // Appends one line (record.dump()) and fsyncs it; the key is then `has`.
  void append(const nlohmann::json& record);
  const std::vector<nlohmann::json>& records() const { return records_; }  // read back + appended, in file order
  bool dropped_torn_line() const { return dropped_torn_; }
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
  std::function<std::string(const nlohmann::json&)> key_of_;
  std::vector<nlohmann::json> records_;
  std::set<std::string> keys_;
  int fd_ = -1;
  bool dropped_torn_ = false;
};

// Reads every record of a JSONL file written by JsonlStore (a torn last line is dropped); BadInput naming file and
// line for anything else that does not parse.
std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& file);

// --shard I/N: work item i (0-based, in the deterministic plan order) belongs to shard I when i % N == I.
struct Shard {
  std::size_t index = 0, count = 1;
  bool owns(std::size_t item) const { return item % count == index; }
  std::string str() const { return std::to_string(index) + "/" + std::to_string(count); }
};
Shard parse_shard(const std::string& text);  // "I/N", 0 <= I < N; BadInput otherwise (names the text and the form)

}  // namespace kvconf::protocol
