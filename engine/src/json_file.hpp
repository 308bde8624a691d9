// Reading a JSON file whose top level is an object (config.json, a checkpoint's index, tokenizer.json and its
// tokenizer_config.json), with LoadError naming the file. Internal to kvconf::engine.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

namespace kvconf::engine {

// Throws LoadError "<file>: cannot open (...)", "<file>: invalid JSON: ..." or "<file>: expected a JSON object at
// top level".
nlohmann::json read_json_object(const std::filesystem::path& p);

}  // namespace kvconf::engine
