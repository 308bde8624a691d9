// `kvconf generate`: loads a model under a numerics profile and decodes N tokens with the KV cache on or off.
#pragma once

#include <cstdint>
#include <string>

namespace kvconf::tools {

struct GenerateCliOptions {
  std::string model;  // checkpoint folder, config.json (or its folder), or llama2.c .bin
  std::string profile = "fp16-eager";
  std::string prompt_ids;           // "1 2 3" (spaces and/or commas)
  std::string prompt;               // text, tokenized with --tokenizer (BOS added)
  bool prompt_given = false;        // --prompt was on the command line (it may be empty)
  bool prompt_ids_given = false;    // --prompt-ids was on the command line (it may be empty)
  std::string tokenizer;            // SentencePiece tokenizer.model
  long long steps = 16;             // > 0
  std::string cache = "on";         // "on" | "off"
  std::string strategy = "greedy";  // "greedy" | "topk" | "topp"
  long long top_k = 50;
  double top_p = 0.9;
  double temperature = 1.0;
  std::uint64_t seed = 0;
  bool json = false;  // print one JSON object instead of the summary
};

// Returns the process exit status: 0 on success, 2 on bad input (one line on stderr naming the problem).
int generate_command(const GenerateCliOptions& o);

}  // namespace kvconf::tools
