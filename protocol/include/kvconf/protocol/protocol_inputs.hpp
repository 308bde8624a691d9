// The protocol's inputs, resolved and checked before any pair runs: the model ("fixture:NAME" or a path), its
// tokenizer, and the sampled prompts (GSM8K few-shot prompts or a prompt-set file of token ids). Everything wrong
// here is BadInput naming the option or file, the field and what was expected.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kvconf/protocol/protocol.hpp"

namespace kvconf::protocol {

struct ModelSource {
  std::string name;                       // as the user gave it ("fixture:llama2-tiny" or the path)
  std::filesystem::path path;             // checkpoint folder, config.json or llama2.c .bin
  std::filesystem::path default_prompts;  // a fixture's prompt-set file; empty for a path
};
ModelSource resolve_model(const ProtocolOptions& o);

struct ProtocolPrompt {
  std::string id;                   // "gsm8k:0123" (0-based line) or "ids:07" (index in the prompt-set file)
  std::vector<int> ids;             // BOS first
  std::optional<std::string> gold;  // normalised GSM8K gold answer; none for id prompts without one
};

struct PromptSet {
  std::string spec;                     // "gsm8k:FILE" or "ids:FILE" (the default filled in)
  std::vector<ProtocolPrompt> prompts;  // the sample, in draw order
  std::size_t available = 0;            // N: problems or prompts in the file
  std::size_t n = 0;                    // the effective n
  std::vector<std::size_t> exemplars;   // GSM8K: 0-based lines of the few-shot exemplars
};

// The tokenizer file for gsm8k prompts and for decoding answers: o.tokenizer, else the model folder's own
// tokenizer.json (fixture:smollm2-135m), else the shared LLaMA-2 one.
std::filesystem::path tokenizer_path(const ProtocolOptions& o, const ModelSource& m);

// Reads and samples the prompts. `vocab`/`max_positions` are the model's; `tokenizer_vocab` is 0 when no tokenizer
// is loaded. `encode` tokenizes GSM8K prompt text (BOS first).
PromptSet resolve_prompts(const ProtocolOptions& o, const ModelSource& m, std::size_t vocab, std::size_t max_positions,
                          std::size_t tokenizer_vocab,
                          const std::function<std::vector<int>(const std::string&)>& encode);

}  // namespace kvconf::protocol
