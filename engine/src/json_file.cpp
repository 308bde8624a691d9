// read_json_object (json_file.hpp): one reader for the engine's JSON files.
#include "json_file.hpp"

#include <fstream>
#include <sstream>
#include <string>

#include "kvconf/engine/error.hpp"

namespace kvconf::engine {

nlohmann::json read_json_object(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail(p.string(), "", "cannot open (no such file or not readable)");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {  // also out_of_range: a number beyond double
    fail(p.string(), "", std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object()) fail(p.string(), "", "expected a JSON object at top level");
  return j;
}

}  // namespace kvconf::engine
