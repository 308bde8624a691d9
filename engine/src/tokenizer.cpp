// The SentencePiece tokenizer (e.g. LLaMA-2's tokenizer.model) behind kvconf::engine::Tokenizer, and the dispatch to
// the byte-level BPE tokenizer.json (tokenizer_bytelevel.cpp).
#include <sentencepiece_processor.h>

#include "kvconf/engine/error.hpp"
#include "kvconf/engine/tokenizer.hpp"
#include "tokenizer_bytelevel.hpp"

namespace kvconf::engine {

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::filesystem::path& model) {
  const std::string file = model.string();
  if (!std::filesystem::is_regular_file(model)) fail(file, "", "no such tokenizer file");
  Tokenizer t;
  if (model.extension() == ".json") {
    t.bl_ = std::make_unique<ByteLevelVocab>(load_byte_level(model));
    return t;
  }
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

bool Tokenizer::can_encode() const { return sp_ != nullptr; }

std::vector<int> Tokenizer::encode(const std::string& text, bool add_bos) const {
  if (bl_)
    throw LoadError(bl_->file + ": a byte-level BPE tokenizer.json: kvconf decodes with it but does not encode (its "
                    "prompts are tokenised by the model's own tokenizer at build time and given as ids)");
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok()) throw LoadError("tokenizer: encode failed: " + status.ToString());
  if (add_bos) ids.insert(ids.begin(), bos_id());
  return ids;
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  if (bl_) return decode_byte_level(*bl_, ids);
  std::string text;
  const auto status = sp_->Decode(ids, &text);
  if (!status.ok()) throw LoadError("tokenizer: decode failed: " + status.ToString());
  return text;
}

std::size_t Tokenizer::vocab_size() const {
  return bl_ ? bl_->pieces.size() : static_cast<std::size_t>(sp_->GetPieceSize());
}
int Tokenizer::bos_id() const { return bl_ ? bl_->bos : sp_->bos_id(); }
int Tokenizer::eos_id() const { return bl_ ? bl_->eos : sp_->eos_id(); }

}  // namespace kvconf::engine
