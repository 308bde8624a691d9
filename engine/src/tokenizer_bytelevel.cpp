// Decoding with a byte-level BPE tokenizer.json (tokenizer_bytelevel.hpp). The byte alphabet is GPT-2's
// (openai/gpt-2 encoder.py, bytes_to_unicode; the same table HF tokenizers' ByteLevel uses): the bytes 33-126,
// 161-172 and 174-255 stand for the code point of the same number, the other 68 bytes, in increasing order, for the
// code points 256, 257, ... A vocabulary entry is a string over that alphabet; its bytes are the inverse map.
#include "tokenizer_bytelevel.hpp"

#include <array>
#include <map>
#include <nlohmann/json.hpp>

#include "json_file.hpp"
#include "kvconf/engine/error.hpp"

namespace kvconf::engine {
namespace {

// Code point -> byte for the 256 code points of the alphabet; -1 elsewhere (code points 0..323).
std::array<int, 324> alphabet_inverse() {
  std::array<int, 324> inv{};
  inv.fill(-1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    inv[static_cast<std::size_t>(printable ? b : next++)] = b;
  }
  return inv;
}

// The bytes a vocabulary entry stands for, or false when it leaves the alphabet (or is not UTF-8).
bool entry_bytes(const std::string& s, std::string& out) {
  static const std::array<int, 324> inv = alphabet_inverse();
  out.clear();
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    unsigned cp = 0;
    std::size_t n = 0;
    if (c < 0x80) {
      cp = c;
      n = 1;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < s.size()) {
      cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
      n = 2;
    } else {
      return false;  // the alphabet's code points are all below 0x800: two bytes at most
    }
    if (cp >= inv.size() || inv[cp] < 0) return false;
    out.push_back(static_cast<char>(inv[cp]));
    i += n;
  }
  return true;
}

int named_id(const ByteLevelVocab& v, const std::map<std::string, int>& ids, const nlohmann::json& cfg,
             const char* key) {
  if (!cfg.contains(key) || cfg[key].is_null()) return -1;  // many HF configs say "bos_token": null
  const nlohmann::json& t = cfg[key];
  const std::string name = t.is_string() ? t.get<std::string>()
                           : t.is_object() && t.contains("content") && t["content"].is_string()
                               ? t["content"].get<std::string>()
                               : std::string();
  const auto it = ids.find(name);
  if (name.empty() || it == ids.end())
    fail(v.file, std::string("tokenizer_config.json: ") + key, "names no token of the vocabulary");
  return it->second;
}

}  // namespace

ByteLevelVocab load_byte_level(const std::filesystem::path& path) {
  ByteLevelVocab v;
  v.file = path.string();
  const nlohmann::json j = read_json_object(path);
  const auto type_of = [&](const char* part) -> std::string {
    if (!j.contains(part) || !j[part].is_object() || !j[part].contains("type") ||
        !j[part]["type"].is_string())
      fail(v.file, std::string(part) + ".type", "missing (a tokenizer.json names its model and decoder types)");
    return j[part]["type"].get<std::string>();
  };
  if (const std::string t = type_of("model"); t != "BPE") fail(v.file, "model.type", "'" + t + "' (expected BPE)");
  if (const std::string t = type_of("decoder"); t != "ByteLevel")
    fail(v.file, "decoder.type", "'" + t + "' (expected ByteLevel: kvconf decodes GPT-2-style byte-level BPE only)");
  const nlohmann::json& vocab = j["model"].contains("vocab") ? j["model"]["vocab"] : nlohmann::json();
  if (!vocab.is_object() || vocab.empty()) fail(v.file, "model.vocab", "missing or empty");

  std::map<int, std::string> by_id;
  std::map<std::string, int> ids;
  std::string bytes;
  for (const auto& [piece, idv] : vocab.items()) {
    const std::string field = "model.vocab[\"" + piece + "\"]";
    if (!idv.is_number_integer() || idv.get<long long>() < 0 || idv.get<long long>() > (1 << 24))
      fail(v.file, field, "must be an id in [0, 2^24]");
    const int id = idv.get<int>();
    if (!entry_bytes(piece, bytes)) fail(v.file, field, "has a character outside the byte-level alphabet");
    if (!by_id.emplace(id, bytes).second) fail(v.file, field, "id " + std::to_string(id) + " is given twice");
    ids[piece] = id;
  }
  if (j.contains("added_tokens")) {
    const nlohmann::json& added = j["added_tokens"];
    if (!added.is_array()) fail(v.file, "added_tokens", "must be an array");
    for (std::size_t i = 0; i < added.size(); ++i) {
      const nlohmann::json& a = added[i];
      const std::string field = "added_tokens[" + std::to_string(i) + "]";
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || a["id"].get<long long>() < 0 ||
          a["id"].get<long long>() > (1 << 24) || !a.contains("content") || !a["content"].is_string())
        fail(v.file, field, "must be an object with an id in [0, 2^24] and a content string");
      const int id = a["id"].get<int>();
      const bool sp = a.contains("special") && a["special"].is_boolean() && a["special"].get<bool>();
      const std::string content = a["content"].get<std::string>();
      by_id[id] = sp ? std::string() : content;  // an added token's content is its text as it is
      ids[content] = id;
    }
  }
  const int n = by_id.rbegin()->first + 1;
  if (static_cast<std::size_t>(n) != by_id.size())
    fail(v.file, "model.vocab", "ids are not 0.." + std::to_string(n - 1) + " without gaps (" +
                                    std::to_string(by_id.size()) + " ids, largest " + std::to_string(n - 1) + ")");
  v.pieces.reserve(by_id.size());
  for (auto& [id, b] : by_id) v.pieces.push_back(std::move(b));

  const std::filesystem::path cfg_file = path.parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (std::filesystem::exists(cfg_file, ec)) {
    const nlohmann::json cfg = read_json_object(cfg_file);
    v.bos = named_id(v, ids, cfg, "bos_token");
    v.eos = named_id(v, ids, cfg, "eos_token");
  }
  return v;
}

std::string decode_byte_level(const ByteLevelVocab& v, const std::vector<int>& ids) {
  std::string out;
  for (int id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= v.pieces.size())
      throw LoadError(v.file + ": decode: id " + std::to_string(id) + " is outside the vocabulary [0, " +
                      std::to_string(v.pieces.size()) + ")");
    out += v.pieces[static_cast<std::size_t>(id)];
  }
  return out;
}

}  // namespace kvconf::engine
