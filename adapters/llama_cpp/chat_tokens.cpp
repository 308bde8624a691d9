// llama_chat_apply_template over the GGUF's template, then llama_tokenize (chat_tokens.hpp).
#include "chat_tokens.hpp"

#include <llama.h>

#include <cstdint>

namespace kvconf::llama_cpp {

std::string chat_text(const Model& m, const std::string& system, const std::string& user) {
  const char* tmpl = llama_model_chat_template(m.get(), nullptr);
  if (!tmpl) throw BadInput("the GGUF has no tokenizer.chat_template");
  std::vector<llama_chat_message> msgs;
  if (!system.empty()) msgs.push_back({"system", system.c_str()});
  msgs.push_back({"user", user.c_str()});
  std::string out(2 * (system.size() + user.size()) + 256, '\0');
  for (int pass = 0; pass < 2; ++pass) {
    const std::int32_t n = llama_chat_apply_template(tmpl, msgs.data(), msgs.size(), true, out.data(),
                                                     static_cast<std::int32_t>(out.size()));
    if (n < 0) throw BadInput("llama_chat_apply_template does not know the GGUF's chat template's format");
    const bool fits = static_cast<std::size_t>(n) <= out.size();
    out.resize(static_cast<std::size_t>(n));
    if (fits) break;
  }
  return out;
}

std::vector<int> tokenize(const Model& m, const std::string& text) {
  const llama_vocab* v = llama_model_get_vocab(m.get());
  const auto len = static_cast<std::int32_t>(text.size());
  // A negative count is the number of tokens the text needs.
  std::int32_t n = llama_tokenize(v, text.data(), len, nullptr, 0, true, true);
  std::vector<llama_token> ids(static_cast<std::size_t>(n < 0 ? -n : n));
  n = llama_tokenize(v, text.data(), len, ids.data(), static_cast<std::int32_t>(ids.size()), true, true);
  if (n < 0)
    throw std::runtime_error("llama_tokenize needs " + std::to_string(-n) + " tokens after saying " +
                             std::to_string(ids.size()));
  ids.resize(static_cast<std::size_t>(n));
  return {ids.begin(), ids.end()};
}

}  // namespace kvconf::llama_cpp
