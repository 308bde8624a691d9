// The SentencePiece tokenizer (e.g. LLaMA-2's tokenizer.model) behind kvconf::engine::Tokenizer.
#include <sentencepiece_processor.h>

#include "kvconf/engine/error.hpp"
#include "kvconf/engine/tokenizer.hpp"

namespace kvconf::engine {

Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::filesystem::path& model) {
  const std::string file = model.string();
  if (!std::filesystem::is_regular_file(model)) fail(file, "", "no such tokenizer file");
  Tokenizer t;
  t.sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  // libsentencepiece reports most defects in its status, but some malformed models throw from inside it (its
  // double-array trie builder: "failed to insert key: zero-length key"): both are this file's error.
  try {
    const auto status = t.sp_->Load(file);
    if (!status.ok()) fail(file, "", "not a SentencePiece model: " + status.ToString());
  } catch (const LoadError&) {
    throw;
  } catch (const std::exception& e) {
    fail(file, "", std::string("not a SentencePiece model: ") + e.what());
  }
  return t;
}

std::vector<int> Tokenizer::encode(const std::string& text, bool add_bos) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok()) throw LoadError("tokenizer: encode failed: " + status.ToString());
  if (add_bos) ids.insert(ids.begin(), bos_id());
  return ids;
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  std::string text;
  const auto status = sp_->Decode(ids, &text);
  if (!status.ok()) throw LoadError("tokenizer: decode failed: " + status.ToString());
  return text;
}

std::size_t Tokenizer::vocab_size() const { return static_cast<std::size_t>(sp_->GetPieceSize()); }
int Tokenizer::bos_id() const { return sp_->bos_id(); }
int Tokenizer::eos_id() const { return sp_->eos_id(); }

}  // namespace kvconf::engine
