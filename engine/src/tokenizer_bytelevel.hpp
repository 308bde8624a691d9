// A byte-level BPE tokenizer.json (GPT-2's byte alphabet, e.g. SmolLM2's) read for decoding: every id's bytes.
// Internal to kvconf::engine (tokenizer.cpp).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kvconf::engine {

struct ByteLevelVocab {
  std::string file;                 // as given (in errors)
  std::vector<std::string> pieces;  // [vocab] the bytes each id stands for ("" for a special added token)
  int bos = -1, eos = -1;           // from tokenizer_config.json beside it (bos_token, eos_token), else -1
};

// Throws LoadError naming the file and field: not JSON, model.type not BPE, decoder.type not ByteLevel, a vocabulary
// entry outside the byte alphabet, an id negative, repeated or missing.
ByteLevelVocab load_byte_level(const std::filesystem::path& file);
// Throws LoadError for an id outside the vocabulary.
std::string decode_byte_level(const ByteLevelVocab& v, const std::vector<int>& ids);

}  // namespace kvconf::engine
