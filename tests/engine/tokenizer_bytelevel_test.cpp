// Unit tests of the byte-level BPE tokenizer.json decoder (engine/src/tokenizer_bytelevel.cpp): a small vocabulary
// written here (ids, the byte alphabet, special tokens, bad files naming their field), and SmolLM2-135M-Instruct's
// tokenizer.json on every GSM8K chat prompt built from it (the question's text comes back from the ids).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kvconf/analysis/prompts.hpp"
#include "kvconf/engine/error.hpp"
#include "kvconf/engine/tokenizer.hpp"
#include "kvconf/protocol/gsm8k.hpp"

namespace fs = std::filesystem;
using kvconf::engine::LoadError;
using kvconf::engine::Tokenizer;

namespace {

// A vocabulary over GPT-2's byte alphabet: "Ġ" (U+0120) is the space byte 0x20, "Ċ" (U+010A) the newline 0x0A,
// "Ã©" (U+00C3 U+00A9) the UTF-8 bytes of "é".
const char* const kVocab = R"({"H": 0, "i": 1, "Ġw": 2, "orld": 3, "Ċ": 4, "caf": 5, "Ã©": 6, "!": 7})";

fs::path write_tokenizer(const std::string& name, const std::string& model_vocab, const std::string& decoder,
                         const std::string& config = "") {
  const fs::path dir = fs::path(::testing::TempDir()) / ("kvconf_bytelevel_" + name);
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json")
      << R"({"added_tokens": [{"id": 8, "content": "<|im_end|>", "special": true},)"
      << R"( {"id": 9, "content": "<|user|>", "special": false}],)"
      << R"( "model": {"type": "BPE", "vocab": )" << model_vocab << R"(, "merges": []},)"
      << R"( "decoder": {"type": ")" << decoder << R"("}})";
  if (!config.empty()) std::ofstream(dir / "tokenizer_config.json") << config;
  return dir / "tokenizer.json";
}

std::string load_error(const fs::path& p) {
  try {
    (void)Tokenizer::load(p);
  } catch (const LoadError& e) {
    return e.what();
  }
  return "<no LoadError>";
}

}  // namespace

TEST(TokenizerByteLevel, DecodesTheByteAlphabet) {
  const Tokenizer t = Tokenizer::load(
      write_tokenizer("ok", kVocab, "ByteLevel", R"({"bos_token": "<|user|>", "eos_token": "<|im_end|>"})"));
  EXPECT_EQ(t.vocab_size(), 10u);
  EXPECT_EQ(t.bos_id(), 9);
  EXPECT_EQ(t.eos_id(), 8);
  EXPECT_FALSE(t.can_encode());
  EXPECT_EQ(t.decode({0, 1, 2, 3, 7}), "Hi world!");
  EXPECT_EQ(t.decode({4, 5, 6}), "\ncaf\xC3\xA9");
  // A special added token decodes to nothing, a plain one to its text.
  EXPECT_EQ(t.decode({0, 1, 8, 9}), "Hi<|user|>");
  EXPECT_THROW((void)t.decode({10}), LoadError);
  EXPECT_THROW((void)t.decode({-1}), LoadError);
  try {
    (void)t.encode("Hi");
    FAIL() << "encode with a tokenizer.json must throw";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("does not encode"), std::string::npos) << e.what();
  }
}

TEST(TokenizerByteLevel, NoConfigMeansNoBosOrEos) {
  const Tokenizer t = Tokenizer::load(write_tokenizer("nocfg", kVocab, "ByteLevel"));
  EXPECT_EQ(t.bos_id(), -1);
  EXPECT_EQ(t.eos_id(), -1);
  // A config that names no BOS (null, as many HF configs have it) is not an error.
  const Tokenizer n = Tokenizer::load(
      write_tokenizer("nullbos", kVocab, "ByteLevel", R"({"bos_token": null, "eos_token": "<|im_end|>"})"));
  EXPECT_EQ(n.bos_id(), -1);
  EXPECT_EQ(n.eos_id(), 8);
}

TEST(TokenizerByteLevel, BadFilesNameTheField) {
  EXPECT_NE(load_error(write_tokenizer("dec", kVocab, "Metaspace")).find("decoder.type"), std::string::npos);
  EXPECT_NE(load_error(write_tokenizer("alpha", R"({"H": 0, "漢": 1})", "ByteLevel")).find("model.vocab[\"漢\"]"),
            std::string::npos);
  EXPECT_NE(load_error(write_tokenizer("twice", R"({"H": 0, "i": 0})", "ByteLevel")).find("given twice"),
            std::string::npos);
  EXPECT_NE(load_error(write_tokenizer("gap", R"({"H": 0, "i": 5})", "ByteLevel")).find("without gaps"),
            std::string::npos);
  EXPECT_NE(load_error(write_tokenizer("neg", R"({"H": -3})", "ByteLevel")).find("model.vocab[\"H\"]"),
            std::string::npos);
  EXPECT_NE(load_error(write_tokenizer("cfg", kVocab, "ByteLevel", R"({"eos_token": "<none>"})")).find("eos_token"),
            std::string::npos);
  const fs::path junk = fs::path(::testing::TempDir()) / "kvconf_bytelevel_junk.json";
  std::ofstream(junk) << "{not json";
  EXPECT_NE(load_error(junk).find("invalid JSON"), std::string::npos);
  EXPECT_NE(load_error(fs::path(::testing::TempDir()) / "absent" / "tokenizer.json").find("no such"),
            std::string::npos);
}

// SmolLM2's tokenizer.json (converted from its GGUF by transformers' builder) on the 1319 GSM8K chat prompts that
// tokenizer made (fixtures/real/chat_prompts.py): each prompt's ids decode to text that holds the question as
// GSM8K's test.jsonl gives it (the ids came from the HF tokenizer, the question from the file), and the chat
// framing's special tokens decode to nothing.
TEST(TokenizerByteLevel, SmolLM2PromptsDecodeToTheirQuestions) {
  if (std::string(KVCONF_SMOLLM2_REASON) != "") GTEST_SKIP() << "SmolLM2-135M-Instruct: " << KVCONF_SMOLLM2_REASON;
  const fs::path gsm8k = fs::path(KVCONF_SHARED_DIR) / "data" / "gsm8k" / "test.jsonl";
  if (!fs::exists(gsm8k)) GTEST_SKIP() << gsm8k << " is missing (KVCONF_SHARED_DIR)";
  const Tokenizer t = Tokenizer::load(fs::path(KVCONF_SMOLLM2_DIR) / "tokenizer.json");
  EXPECT_EQ(t.vocab_size(), 49152u);
  EXPECT_EQ(t.eos_id(), 2);  // <|im_end|>, the model's eos_token_id
  const std::vector<kvconf::analysis::Prompt> prompts = kvconf::analysis::read_prompts(KVCONF_SMOLLM2_PROMPTS);
  const std::vector<kvconf::protocol::Gsm8kProblem> problems = kvconf::protocol::read_gsm8k(gsm8k);
  ASSERT_EQ(prompts.size(), problems.size());
  std::size_t held = 0;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const std::string text = t.decode(prompts[i].ids);
    const std::string& raw = problems[i].question;  // chat_prompts.py strips the question's ends
    const std::size_t b = raw.find_first_not_of(" \n"), e = raw.find_last_not_of(" \n");
    const std::string q = raw.substr(b, e - b + 1);
    const bool holds = text.find(q) != std::string::npos;
    EXPECT_TRUE(holds) << prompts[i].id << " decodes to:\n" << text << "\nwhich lacks the question:\n" << q;
    EXPECT_EQ(text.find("<|im_"), std::string::npos) << prompts[i].id;
    held += holds;
  }
  std::printf("%zu of %zu SmolLM2 chat prompts decode to text holding their GSM8K question\n", held, prompts.size());
}
