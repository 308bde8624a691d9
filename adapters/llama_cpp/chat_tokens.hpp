// llama.cpp's own tokenisation of a chat turn, independent of transformers: the GGUF's chat template applied by
// llama_chat_apply_template (llama.cpp's built-in formats, no Jinja), then llama_tokenize on the GGUF's vocabulary
// and pre-tokenizer, special tokens parsed. kvconf-llama-trace's hidden --tokenize writes it for each prompt's text,
// so a test can hold it to the ids the prompt set was made with (tokenizer.json, docs/LLAMA_CPP.md).
#pragma once

#include <string>
#include <vector>

#include "llama_run.hpp"

namespace kvconf::llama_cpp {

// `user` as one user turn after a `system` turn (none when empty), with the assistant's opening added, in the
// GGUF's chat template (tokenizer.chat_template) as llama.cpp formats it. BadInput when the GGUF has no template or
// llama.cpp does not know its format.
std::string chat_text(const Model& m, const std::string& system, const std::string& user);

// `text` tokenised by llama.cpp (llama_tokenize: the GGUF's add_bos_token / add_eos_token honoured, special tokens
// such as <|im_start|> parsed as themselves).
std::vector<int> tokenize(const Model& m, const std::string& text);

}  // namespace kvconf::llama_cpp
