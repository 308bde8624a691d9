// SentencePiece tokenizer (tokenizer.model, e.g. LLaMA-2's) via libsentencepiece.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace kvconf::engine {

class Tokenizer {
 public:
  // Throws LoadError naming the file when it is missing or not a SentencePiece model.
  static Tokenizer load(const std::filesystem::path& model);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  std::vector<int> encode(const std::string& text, bool add_bos = true) const;  // BOS = bos_id() first when asked
  std::string decode(const std::vector<int>& ids) const;
  std::size_t vocab_size() const;
  int bos_id() const;
  int eos_id() const;

 private:
  Tokenizer() = default;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace kvconf::engine
