// Prompt-set files: {"prompts": [{"id": "...", "text": "...", "ids": [1, ...]}]}, written atomically and read with
// errors that name the file and the field ("<file>: prompts[3].ids: ...").
#include "kvconf/analysis/prompts.hpp"

#include <climits>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "kvconf/engine/atomic_file.hpp"

namespace kvconf::analysis {
namespace {

[[noreturn]] void bad(const std::filesystem::path& file, const std::string& field, const std::string& problem) {
  throw std::runtime_error(file.string() + ": " + field + ": " + problem);
}

}  // namespace

void write_prompts(const std::filesystem::path& file, const std::vector<Prompt>& prompts) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const Prompt& p : prompts) {
    nlohmann::ordered_json j;
    j["id"] = p.id;
    j["text"] = p.text;
    j["ids"] = p.ids;
    arr.push_back(std::move(j));
  }
  nlohmann::ordered_json root;
  root["prompts"] = std::move(arr);
  engine::write_file_atomic(file, root.dump(1) + "\n");
}

std::vector<Prompt> read_prompts(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) bad(file, "", "cannot open the prompt file");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {  // also out_of_range: a number beyond double
    bad(file, "", std::string("not valid JSON: ") + e.what());
  }
  if (!root.is_object() || !root.contains("prompts")) bad(file, "prompts", "missing");
  const nlohmann::json& arr = root["prompts"];
  if (!arr.is_array()) bad(file, "prompts", "must be an array");

  std::vector<Prompt> out;
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string at = "prompts[" + std::to_string(i) + "]";
    const nlohmann::json& e = arr[i];
    if (!e.is_object()) bad(file, at, "must be an object");
    Prompt p;
    if (!e.contains("id")) bad(file, at + ".id", "missing");
    if (!e["id"].is_string()) bad(file, at + ".id", "must be a string");
    p.id = e["id"].get<std::string>();
    if (e.contains("text")) {  // optional: "" for id-only prompts
      if (!e["text"].is_string()) bad(file, at + ".text", "must be a string");
      p.text = e["text"].get<std::string>();
    }
    if (!e.contains("ids")) bad(file, at + ".ids", "missing");
    const nlohmann::json& ids = e["ids"];
    if (!ids.is_array()) bad(file, at + ".ids", "must be an array of token ids");
    if (ids.empty()) bad(file, at + ".ids", "empty (a prompt needs at least one token)");
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const nlohmann::json& v = ids[k];
      const std::string f = at + ".ids[" + std::to_string(k) + "]";
      if (!v.is_number_integer()) bad(file, f, "must be an integer");
      if (v.is_number_unsigned() ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT_MAX)
                                 : (v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > INT_MAX))
        bad(file, f, "token id " + v.dump() + " out of range [0, " + std::to_string(INT_MAX) + "]");
      p.ids.push_back(static_cast<int>(v.get<std::int64_t>()));
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace kvconf::analysis
