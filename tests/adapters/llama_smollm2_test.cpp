// SmolLM2-135M-Instruct, a real trained model, in llama.cpp (issue 37, docs/LLAMA_CPP.md "SmolLM2"): it loads and
// generates from the original Q4_1 GGUF and from its f16 and f32 forms; llama.cpp's own tokenizer gives the prompt
// set's ids (made by tokenizer.json through the chat template); llama.cpp f32 agrees with kvconf's fp32 engine within
// the cross-check's B; an f16 cache-ON / cache-OFF pair passes kvconf check, and a planted path lie fails it.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "check_results.hpp"
#include "kvconf/analysis/prompts.hpp"
#include "kvconf/engine/model.hpp"
#include "kvconf/engine/safetensors.hpp"
#include "kvconf/protocol/trace.hpp"
#include "kvconf/protocol/trace_check.hpp"
#include "llama_crosscheck.hpp"
#include "llama_traces.hpp"

namespace kvconf {
namespace {

namespace fs = std::filesystem;

// The reason to skip: the model's files are missing (KVCONF_SMOLLM2_REASON from CMake, or no GSM8K in the shared data
// for the prompt set); empty when they are there.
std::string missing() {
  if (!std::string(KVCONF_SMOLLM2_REASON).empty()) return KVCONF_SMOLLM2_REASON;
  if (!fs::exists(KVCONF_SMOLLM2_PROMPTS))
    return std::string("no ") + KVCONF_SMOLLM2_PROMPTS + " (fixtures/real/chat_prompts.py needs GSM8K's test.jsonl)";
  return "";
}

class LlamaCppSmolLM2 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = missing(); !why.empty()) GTEST_SKIP() << "SmolLM2-135M-Instruct not available: " << why;
  }
};

const engine::Model& smollm2() {
  static const engine::Model m = engine::load_model(KVCONF_SMOLLM2_DIR, Format::fp32);
  return m;
}

// A llama.cpp run of SmolLM2 in one of its forms: q4_1 (the original file), f16 or f32 (build/gguf).
testing::LlamaRun run_of(const std::string& weights, const std::string& cache, int prompts, int tokens) {
  testing::LlamaRun r{"smollm2-135m", weights, cache, false, "greedy", prompts, tokens};
  r.prompt_file = KVCONF_SMOLLM2_PROMPTS;
  if (weights == "q4_1") r.gguf = KVCONF_SMOLLM2_GGUF;
  return r;
}

std::vector<protocol::Trace> traces(const testing::LlamaRun& run) {
  return testing::run_traces(run, testing::llama_traces);
}

// The trace's metadata as written (protocol::Trace keeps only what kvconf check reads).
nlohmann::json trace_meta(const fs::path& file) {
  return nlohmann::json::parse(engine::SafetensorsFile::open(file)->metadata().at("kvconf.trace"));
}

// Each form loads in llama.cpp and generates, cache ON and OFF, and its traces say what the weights are: the Q4_1
// file's 210 Q4_1 matrices, its Q8_0 embedding (also the tied classifier) and 61 f32 norms, the activations ggml's
// products read (q8_1 for Q4_1, q8_0 for Q8_0), dtype float16 (not an fp32 reference: WeightTypes::dtype) and the
// weight type in the profile; f16 and f32 as before.
TEST_F(LlamaCppSmolLM2, LoadsAndGeneratesInEveryForm) {
  struct Form {
    const char *weights, *cache, *dtype, *profile;
  };
  for (const auto& [weights, cache, dtype, profile] :
       {Form{"q4_1", "f16", "float16", "fp16-llama.cpp-q4_1-softmax-kvf16"},
        Form{"f16", "f16", "float16", "fp16-llama.cpp-softmax-kvf16"},
        Form{"f32", "f32", "float32", "fp32-llama.cpp-softmax-kvf32"}}) {
    const std::vector<protocol::Trace> ts = traces(run_of(weights, cache, 1, 4));
    ASSERT_EQ(ts.size(), 2u) << weights;
    for (const protocol::Trace& t : ts) {
      SCOPED_TRACE(t.file.string());
      EXPECT_EQ(t.generated_ids.size(), 4u);
      EXPECT_EQ(t.dtype, dtype);
      EXPECT_EQ(t.profile(), profile);
      EXPECT_EQ(t.vocab, 49152u);
      const nlohmann::json w = trace_meta(t.file)["model"]["weights"];
      EXPECT_EQ(w["file_type"], weights) << w.dump();
      if (std::string(weights) == "q4_1") {
        EXPECT_EQ(w["tensor_types"], (nlohmann::json{{"f32", 61}, {"q4_1", 210}, {"q8_0", 1}}));
        EXPECT_EQ(w["mul_mat_input"]["q4_1"], "q8_1");
        EXPECT_EQ(w["mul_mat_input"]["q8_0"], "q8_0");
      } else {
        EXPECT_EQ(w["tensor_types"].size(), std::string(weights) == "f32" ? 1u : 2u) << w.dump();
      }
      std::printf("%s: %s, tokens", weights, t.cache_on ? "cache ON" : "cache OFF");
      for (int id : t.generated_ids) std::printf(" %d", id);
      std::printf("\n");
    }
  }
}

// The chat template's system turn (chat_template.jinja adds it when the chat has none; llama.cpp's formatter does
// not run Jinja, so it is given to llama.cpp as the system message).
constexpr const char* kSystemTurn = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

// llama.cpp's own tokenizer against tokenizer.json, on the ids the traces feed: every prompt's text as one user turn
// in the GGUF's chat template formatted by llama_chat_apply_template, tokenised by llama_tokenize (the "smollm"
// pre-tokenizer, special tokens parsed), must give the prompt set's ids (transformers' apply_chat_template over
// tokenizer.json, fixtures/real/chat_prompts.py), on all 1319 prompts.
TEST_F(LlamaCppSmolLM2, TokenizerAgreesWithTokenizerJson) {
  {
    std::ifstream in(fs::path(KVCONF_SMOLLM2_DIR) / "chat_template.jinja");
    const std::string tmpl((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_NE(tmpl.find(std::string("<|im_start|>system\n") + kSystemTurn + "<|im_end|>"), std::string::npos)
        << "chat_template.jinja's default system turn changed: update kSystemTurn";
  }
  const std::vector<analysis::Prompt> want = analysis::read_prompts(KVCONF_SMOLLM2_PROMPTS);
  const std::string command_head = std::string("\"") + KVCONF_LLAMA_TRACE_EXE + "\" --model \"" + KVCONF_SMOLLM2_GGUF +
                                   "\" --prompts \"" + KVCONF_SMOLLM2_PROMPTS + "\" --n " +
                                   std::to_string(want.size()) + " --tokenize --system \"" + kSystemTurn + "\"";
  const std::string key = command_head + "\nadapter " + testing::fingerprint(KVCONF_LLAMA_TRACE_EXE) + "\nengine " +
                          testing::folder_fingerprint(fs::path(KVCONF_LLAMA_CPP_LIB_DIR), ".so") + "\nmodel " +
                          testing::fingerprint(KVCONF_SMOLLM2_GGUF) + "\nprompts " +
                          testing::fingerprint(KVCONF_SMOLLM2_PROMPTS);
  std::string why;
  const fs::path dir = testing::write_once(
      fs::path(KVCONF_LLAMA_TRACES_DIR) / "smollm2-135m.tokens", &why,
      [&](const fs::path& tmp) { return command_head + " --out \"" + tmp.string() + "\""; }, key);
  ASSERT_FALSE(dir.empty()) << why;
  const std::vector<analysis::Prompt> got = analysis::read_prompts(dir / "tokens.json");
  ASSERT_EQ(got.size(), want.size());
  std::size_t differ = 0, tokens = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].id, want[i].id);
    tokens += want[i].ids.size();
    if (got[i].ids == want[i].ids) continue;
    std::size_t at = 0;
    while (at < got[i].ids.size() && at < want[i].ids.size() && got[i].ids[at] == want[i].ids[at]) ++at;
    if (++differ <= 3)
      ADD_FAILURE() << want[i].id << ": llama.cpp's " << got[i].ids.size() << " ids differ from tokenizer.json's "
                    << want[i].ids.size() << " from position " << at << " ("
                    << (at < got[i].ids.size() ? std::to_string(got[i].ids[at]) : "end") << " vs "
                    << (at < want[i].ids.size() ? std::to_string(want[i].ids[at]) : "end") << ")";
  }
  EXPECT_EQ(differ, 0u);
  std::printf("llama.cpp's tokenizer: %zu of %zu prompts give tokenizer.json's ids (%zu tokens)\n",
              want.size() - differ, want.size(), tokens);
}

// llama.cpp f32 (the Q4_1 file dequantised: exactly the HF folder's numbers), f32 cache, soft_max, against kvconf's
// fp32 engine on the HF folder: the same greedy tokens and logits within LlamaCppCrossCheck's B = 4·S32, both paths,
// 2 prompts × 8 tokens.
TEST_F(LlamaCppSmolLM2, F32AgreesWithKvconfFp32) {
  testing::cross_check(smollm2(), testing::Expectation{"smollm2-135m"}, traces(run_of("f32", "f32", 2, 8)));
}

// llama.cpp's own f16 pair (f16 weights, f16 cache, soft_max, 1 prompt × 8 greedy tokens) through kvconf check's
// rules with the fp32 replay on the HF folder, as `kvconf check --model` runs them: every rule passes.
TEST_F(LlamaCppSmolLM2, F16PairPassesKvconfCheck) {
  const std::vector<protocol::Trace> ts = traces(run_of("f16", "f16", 1, 8));
  ASSERT_EQ(ts.size(), 2u);
  const results::RunPairRecord rec = protocol::check_trace_pair(protocol::make_trace_pair(ts[1], ts[0]), &smollm2());
  SCOPED_TRACE(rec.key());
  ASSERT_GE(rec.rules.size(), 2u);
  EXPECT_EQ(rec.rules[0].rule, "scenario_path");
  for (const results::CheckResult& r : rec.rules) {
    EXPECT_TRUE(r.pass) << r.rule << ": " << r.detail;
    std::printf("  %s: %s: %s\n", r.rule.c_str(), r.pass ? "pass" : "FAIL", r.detail.substr(0, 160).c_str());
  }
}

// The same pair with kvconf-llama-trace's planted lie (--plant recompute_on: cache ON's steps clear the memory and
// decode everything, logits a correct run could give): kvconf check fails it on scenario_path, naming call 1's rows.
TEST_F(LlamaCppSmolLM2, PlantedRecomputeFailsScenarioPath) {
  testing::LlamaRun run = run_of("f16", "f16", 1, 8);
  run.plant = "recompute_on";
  const std::vector<protocol::Trace> ts = traces(run);
  ASSERT_EQ(ts.size(), 2u);
  const results::RunPairRecord rec = protocol::check_trace_pair(protocol::make_trace_pair(ts[1], ts[0]), &smollm2());
  EXPECT_FALSE(results::all_pass(rec.rules));
  const results::CheckResult r = testing::rule_of(rec.rules, "scenario_path");
  EXPECT_FALSE(r.pass);
  EXPECT_NE(r.detail.find("calls[1] fed"), std::string::npos) << r.detail;
  std::printf("planted recompute_on: scenario_path: %s\n", r.detail.substr(0, 240).c_str());
}

}  // namespace
}  // namespace kvconf
