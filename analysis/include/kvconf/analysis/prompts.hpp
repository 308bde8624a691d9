// A prompt set file: {"prompts": [{"id": "...", "text": "...", "ids": [1, ...]}]}. fixtures/ writes them (GSM8K
// tokenized, token-id prompts), the model suites and `kvconf` read them.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kvconf::analysis {

struct Prompt {
  std::string id;        // "gsm8k_0007", "stories_03"
  std::string text;      // the question ("" for id-only prompts)
  std::vector<int> ids;  // with BOS first
};

void write_prompts(const std::filesystem::path& file, const std::vector<Prompt>& prompts);  // atomic (temp + rename)
// Throws std::runtime_error "<file>: prompts[i].ids: ..." naming the field on bad input; missing file likewise.
std::vector<Prompt> read_prompts(const std::filesystem::path& file);

}  // namespace kvconf::analysis
