// read_results: reads the JSONL records of one or more result directories (shards) and merges them by record key,
// deterministically ordered, so that N merged shards equal one unsharded run record for record.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "kvconf/reports/report.hpp"

namespace kvconf::reports {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The records of a JSONL file: one JSON object per line, empty lines ignored. The last line when the file does not
// end with a newline and it does not parse is a record torn by a kill, and is dropped; anything else that does not
// parse is an error naming the file and line (the same tolerance as tools' JsonlStore, which writes these files).
std::vector<std::pair<std::size_t, json>> read_jsonl_lines(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file.string() + ": " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  std::vector<std::pair<std::size_t, json>> out;
  std::size_t start = 0, line = 0;
  while (start < all.size()) {
    ++line;
    std::size_t nl = all.find('\n', start);
    const bool last_unterminated = nl == std::string::npos;
    if (last_unterminated) nl = all.size();
    const std::string text = all.substr(start, nl - start);
    start = nl + 1;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      out.emplace_back(line, json::parse(text));
    } catch (const json::exception& e) {  // also out_of_range: a number beyond double
      if (last_unterminated) break;       // torn last line
      throw std::runtime_error(file.string() + " line " + std::to_string(line) + ": not a JSON record (" + e.what() +
                               ")");
    }
  }
  return out;
}

template <class Record>
struct Seen {
  Record record;
  std::string content;  // the record's JSON with the wall time zeroed: what must agree between duplicates
  fs::path dir;
};

template <class Record, class Parse>
void merge_file(const fs::path& dir, const char* name, Parse parse, std::map<std::string, Seen<Record>>& into) {
  const fs::path file = dir / name;
  for (auto& [line, j] : read_jsonl_lines(file)) {
    Record r;
    try {
      r = parse(j);
    } catch (const std::exception& e) {
      throw std::runtime_error(file.string() + " line " + std::to_string(line) + ": " + e.what());
    }
    Record timeless = r;
    timeless.seconds = 0.0;
    std::string content = results::to_json(timeless).dump();
    const std::string key = r.key();
    auto it = into.find(key);
    if (it == into.end()) {
      into.emplace(key, Seen<Record>{std::move(r), std::move(content), dir});
    } else if (it->second.content != content) {
      throw std::runtime_error("conflicting records for key '" + key + "' in " + it->second.dir.string() + " and " +
                               dir.string() + " (" + name + "): the same run pair or case with different results");
    }
  }
}

}  // namespace

ReportInput read_results(const std::vector<fs::path>& dirs) {
  if (dirs.empty()) throw std::runtime_error("read_results: no result directory given");
  std::map<std::string, Seen<results::RunPairRecord>> pairs;
  std::map<std::string, Seen<results::KernelCaseRecord>> kernels;
  ReportInput in;
  in.title = "kvconf report";
  in.meta = {{"sources", json::array()}, {"manifests", json::array()}};
  for (const fs::path& dir : dirs) {
    std::error_code ec;
    const bool has_pairs = fs::is_regular_file(dir / "pairs.jsonl", ec);
    const bool has_kernels = fs::is_regular_file(dir / "kernels.jsonl", ec);
    const bool has_experiments = fs::is_regular_file(dir / "experiments.jsonl", ec);  // merged by kvconf report
    if (!has_pairs && !has_kernels && !has_experiments)
      throw std::runtime_error(dir.string() +
                               ": no pairs.jsonl, kernels.jsonl or experiments.jsonl (not a kvconf result directory)");
    if (has_pairs) merge_file(dir, "pairs.jsonl", results::run_pair_from_json, pairs);
    if (has_kernels) merge_file(dir, "kernels.jsonl", results::kernel_case_from_json, kernels);
    in.meta["sources"].push_back(dir.string());
    const fs::path manifest = dir / "manifest.json";
    if (fs::is_regular_file(manifest, ec)) {
      std::ifstream m(manifest);
      try {
        in.meta["manifests"].push_back(json::parse(m));
      } catch (const json::exception& e) {  // also out_of_range: a number beyond double
        throw std::runtime_error(manifest.string() + ": not JSON (" + e.what() + ")");
      }
    }
  }
  for (auto& [_, s] : pairs) in.pairs.push_back(std::move(s.record));  // std::map: ordered by key
  for (auto& [_, s] : kernels) in.kernels.push_back(std::move(s.record));
  return in;
}

}  // namespace kvconf::reports
