// Unit tests of analysis/prompts: write/read round trip, and errors that name the file and the offending field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include "kvconf/analysis/prompts.hpp"

namespace kvconf::analysis {
namespace {

namespace fs = std::filesystem;

class PromptsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvconf_prompts_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& content) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << content;
    return p;
  }
  // The message of read_prompts' exception (fails the test when it does not throw).
  std::string error_of(const fs::path& p) {
    try {
      read_prompts(p);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    ADD_FAILURE() << "read_prompts(" << p << ") did not throw";
    return "";
  }
  fs::path dir_;
};

TEST_F(PromptsFile, RoundTrip) {
  const std::vector<Prompt> in = {{"gsm8k_0000", "Question: a \"quoted\" ünïcode\nAnswer:", {1, 894, 29901}},
                                  {"stories_01", "", {1, 3, 511}}};
  const fs::path p = dir_ / "sub" / "p.json";  // parent folder created by the atomic writer
  write_prompts(p, in);
  const auto out = read_prompts(p);
  ASSERT_EQ(out.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(out[i].id, in[i].id);
    EXPECT_EQ(out[i].text, in[i].text);
    EXPECT_EQ(out[i].ids, in[i].ids);
  }
  for (const auto& e : fs::directory_iterator(p.parent_path()))  // no temporary left behind
    EXPECT_EQ(e.path().filename(), "p.json");
  write_prompts(p, {});
  EXPECT_TRUE(read_prompts(p).empty());
}

TEST_F(PromptsFile, ErrorsNameFileAndField) {
  const auto expect_has = [&](const fs::path& p, const std::string& what) {
    const std::string msg = error_of(p);
    EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << "expected '" << what << "' in: " << msg;
  };
  expect_has(dir_ / "absent.json", "cannot open");
  expect_has(write("a.json", "{\"prompts\": [1, 2"), "not valid JSON");
  expect_has(write("b.json", "{\"other\": []}"), "prompts: missing");
  expect_has(write("c.json", "{\"prompts\": {}}"), "prompts: must be an array");
  expect_has(write("d.json", R"({"prompts": [{"id": "x", "ids": [1]}, {"id": "y"}]})"), "prompts[1].ids: missing");
  expect_has(write("e.json", R"({"prompts": [{"ids": [1]}]})"), "prompts[0].id: missing");
  expect_has(write("f.json", R"({"prompts": [{"id": 7, "ids": [1]}]})"), "prompts[0].id: must be a string");
  expect_has(write("g.json", R"({"prompts": [{"id": "x", "ids": [1, 5, -3]}]})"), "prompts[0].ids[2]: token id -3");
  expect_has(write("h.json", R"({"prompts": [{"id": "x", "ids": [1, "5"]}]})"),
             "prompts[0].ids[1]: must be an integer");
  expect_has(write("i.json", R"({"prompts": [{"id": "x", "ids": []}]})"), "prompts[0].ids: empty");
  expect_has(write("j.json", R"({"prompts": [{"id": "x", "text": 3, "ids": [1]}]})"),
             "prompts[0].text: must be a string");
  expect_has(write("k.json", R"({"prompts": [{"id": "x", "ids": 1}]})"), "prompts[0].ids: must be an array");
  expect_has(write("l.json", R"({"prompts": [{"id": "x", "ids": [1, 4294967296]}]})"), "prompts[0].ids[1]: token id");
  expect_has(write("m.json", R"({"prompts": [{"id": "x", "ids": [1.5]}]})"), "prompts[0].ids[0]: must be an integer");
}

TEST_F(PromptsFile, TextIsOptional) {
  const auto out = read_prompts(write("t.json", R"({"prompts": [{"id": "s", "ids": [1, 2]}]})"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].text, "");
  EXPECT_EQ(out[0].ids, (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace kvconf::analysis
