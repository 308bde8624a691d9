// Tokenizers kvconf reads: SentencePiece (tokenizer.model, e.g. LLaMA-2's) via libsentencepiece, and a byte-level BPE
// tokenizer.json (GPT-2 style, e.g. SmolLM2's) for decoding only: such prompts are tokenised by the model's own
// tokenizer in Python at build time (fixtures/real/chat_prompts.py) and reach kvconf as ids.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace kvconf::engine {

struct ByteLevelVocab;  // tokenizer_bytelevel.cpp

class Tokenizer {
 public:
  // A file named *.json is read as a byte-level BPE tokenizer.json, anything else as a SentencePiece model. Throws
  // LoadError naming the file (and the field) when it is missing or not such a tokenizer.
  static Tokenizer load(const std::filesystem::path& model);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Whether encode() works: false for a tokenizer.json (LoadError from encode, naming the file).
  bool can_encode() const;
  std::vector<int> encode(const std::string& text, bool add_bos = true) const;  // BOS = bos_id() first when asked
  // A tokenizer.json's special added tokens (<|im_end|>, ...) decode to nothing, as SentencePiece's control pieces do.
  std::string decode(const std::vector<int>& ids) const;
  std::size_t vocab_size() const;
  int bos_id() const;  // -1 when the tokenizer names none
  int eos_id() const;

 private:
  Tokenizer();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::unique_ptr<ByteLevelVocab> bl_;
};

}  // namespace kvconf::engine
