// Unit tests of the safetensors reader, writer and sharded Checkpoint: round trips per dtype (RNE on writing),
// a hand-built file, and every malformed-file case the reader must reject with a LoadError naming file and field.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kvconf/engine/error.hpp"
#include "temp_dir.hpp"
#include "kvconf/engine/safetensors.hpp"
#include "kvconf/numerics/rounding.hpp"

namespace fs = std::filesystem;
using namespace kvconf::engine;

namespace {

fs::path temp_dir() { return kvconf::test::temp_dir("kvconf_st_test"); }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
void spit(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// A file from a header text and raw data bytes: u64 LE length, header, data.
std::string file_bytes(const std::string& header, const std::string& data) {
  const std::uint64_t n = header.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + data;
}
template <class T>
std::string raw(std::initializer_list<T> v) {
  std::string s(v.size() * sizeof(T), '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

std::string open_error(const fs::path& p) {
  try {
    (void)SafetensorsFile::open(p);
  } catch (const LoadError& e) {
    return e.what();
  }
  return "<no LoadError>";
}
std::string open_error(const std::string& header, const std::string& data) {
  const fs::path p = temp_dir() / "bad.safetensors";
  spit(p, file_bytes(header, data));
  return open_error(p);
}

bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

}  // namespace

// Values whose rounding to fp16 / bf16 is known: ties to even, overflow, subnormals.
TEST(Safetensors, RoundTripEachDtypeRoundsToNearestEven) {
  const std::vector<float> v = {0.0f,
                                -0.0f,
                                1.0f,
                                -2.5f,
                                1.0f + 0x1p-11f,
                                1.0f + 3 * 0x1p-11f,
                                1.0f + 0x1p-8f,
                                1.0f + 3 * 0x1p-8f,
                                70000.0f,
                                0x1p-24f,
                                0x1p-25f,
                                3 * 0x1p-25f,
                                3.14159265f,
                                1e-30f};
  const fs::path p = temp_dir() / "rt.safetensors";
  write_safetensors(p, {{"a16", Dtype::f16, {2, 7}, v}, {"b16", Dtype::bf16, {14}, v}, {"c32", Dtype::f32, {14, 1}, v}},
                    {{"format", "pt"}});
  const auto f = SafetensorsFile::open(p);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  ASSERT_EQ(f->tensors().size(), 3u);
  const auto h = f->find("a16")->to_float();
  const auto b = f->find("b16")->to_float();
  const auto c = f->find("c32")->to_float();
  EXPECT_EQ(f->find("a16")->shape, (std::vector<std::size_t>{2, 7}));
  EXPECT_EQ(f->find("c32")->numel(), 14u);
  for (std::size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(std::bit_cast<std::uint32_t>(c[i]), std::bit_cast<std::uint32_t>(v[i])) << i;
    EXPECT_EQ(h[i], static_cast<float>(kvconf::round_to(kvconf::Format::fp16, v[i]))) << i;
    EXPECT_EQ(b[i], static_cast<float>(kvconf::round_to(kvconf::Format::bf16, v[i]))) << i;
  }
  // The same facts spelled out: ties go to the even neighbour, 70000 overflows fp16, 2^-25 ties to 0.
  EXPECT_EQ(h[4], 1.0f);
  EXPECT_EQ(h[5], 1.0f + 0x1p-9f);
  EXPECT_EQ(b[6], 1.0f);
  EXPECT_EQ(b[7], 1.0f + 0x1p-6f);
  EXPECT_TRUE(std::isinf(h[8]));
  EXPECT_EQ(b[8], 70144.0f);
  EXPECT_EQ(h[9], 0x1p-24f);
  EXPECT_EQ(h[10], 0.0f);
  EXPECT_EQ(h[11], 0x1p-23f);
  EXPECT_TRUE(std::signbit(h[1]) && std::signbit(b[1]));
}

TEST(Safetensors, WriterLayout) {
  const fs::path p = temp_dir() / "w.safetensors";
  write_safetensors(p, {{"zeta", Dtype::f32, {1}, {1.0f}}, {"alpha", Dtype::f16, {3}, {1, 2, 3}}});
  const std::string bytes = slurp(p);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u) << "header not padded to a multiple of 8";
  EXPECT_EQ(bytes.size(), 8 + n + 4 + 6);
  const std::string header = bytes.substr(8, n);
  EXPECT_LT(header.find("\"alpha\""), header.find("\"zeta\"")) << "keys not sorted: " << header;
  EXPECT_TRUE(contains(header, R"("zeta":{"data_offsets":[0,4])")) << header;
  EXPECT_TRUE(contains(header, R"("alpha":{"data_offsets":[4,10])")) << header;
  EXPECT_EQ(header.find_first_not_of(' ', header.rfind('}') + 1), std::string::npos) << "padding is not spaces";
}

TEST(Safetensors, WriterRejectsBadInput) {
  const fs::path p = temp_dir() / "x.safetensors";
  EXPECT_THROW(write_safetensors(p, {{"a", Dtype::f32, {2, 2}, {1, 2, 3}}}), std::invalid_argument);
  EXPECT_THROW(write_safetensors(p, {{"a", Dtype::f32, {1}, {1}}, {"a", Dtype::f16, {1}, {2}}}), std::invalid_argument);
  EXPECT_FALSE(fs::exists(p));
}

TEST(Safetensors, HandBuiltFile) {
  const std::string header =
      R"({"__metadata__":{"k":"v"},"h":{"dtype":"F16","shape":[2,2],"data_offsets":[8,16]},)"
      R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[16,20]},"f":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("e":{"dtype":"F32","shape":[0,3],"data_offsets":[20,20]}})";
  const std::string data = raw<float>({1.5f, -2.0f}) + raw<std::uint16_t>({0x3c00, 0xc000, 0x0001, 0x7c00}) +
                           raw<std::uint16_t>({0x3f80, 0x4049});
  const fs::path p = temp_dir() / "hand.safetensors";
  spit(p, file_bytes(header, data));
  const auto f = SafetensorsFile::open(p);
  EXPECT_EQ(f->path(), p);
  EXPECT_EQ(f->metadata().at("k"), "v");
  EXPECT_EQ(f->find("f")->to_float(), (std::vector<float>{1.5f, -2.0f}));
  const auto h = f->find("h")->to_float();
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[1], -2.0f);
  EXPECT_EQ(h[2], 0x1p-24f);
  EXPECT_TRUE(std::isinf(h[3]) && h[3] > 0);
  EXPECT_EQ(f->find("b")->to_float(), (std::vector<float>{1.0f, 3.140625f}));
  EXPECT_EQ(f->find("b")->dtype, Dtype::bf16);
  EXPECT_EQ(f->find("e")->numel(), 0u);
  EXPECT_EQ(f->find("missing"), nullptr);
  EXPECT_STREQ(dtype_name(Dtype::bf16), "BF16");
  EXPECT_EQ(dtype_size(Dtype::f16), 2u);
}

// Every fp16 bit pattern widens to the value numerics' decode gives.
TEST(Safetensors, F16WideningMatchesNumericsForAllPatterns) {
  std::vector<std::uint16_t> bits(65536);
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::uint16_t>(i);
  std::string data(reinterpret_cast<const char*>(bits.data()), bits.size() * 2);
  const fs::path p = temp_dir() / "all.safetensors";
  spit(p, file_bytes(R"({"x":{"dtype":"F16","shape":[65536],"data_offsets":[0,131072]}})", data));
  const auto v = SafetensorsFile::open(p)->find("x")->to_float();
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const double want = kvconf::decode(kvconf::Format::fp16, i);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(v[i])) << i;
    } else {
      ASSERT_EQ(static_cast<double>(v[i]), want) << "pattern " << i;
      ASSERT_EQ(std::signbit(v[i]), std::signbit(want)) << i;
    }
  }
}

TEST(SafetensorsRejects, ShortFileAndHeaderBeyondFile) {
  const fs::path p = temp_dir() / "short.safetensors";
  spit(p, "abc");
  EXPECT_TRUE(contains(open_error(p), p.string() + ": header: file is 3 bytes")) << open_error(p);
  std::string bytes = file_bytes("{}", "");
  const std::uint64_t huge = 1000;
  std::memcpy(bytes.data(), &huge, 8);
  spit(p, bytes);
  EXPECT_TRUE(contains(open_error(p), "header length 1000 runs past the end of the file (10 bytes)")) << open_error(p);
  EXPECT_TRUE(contains(open_error(temp_dir() / "none.safetensors"), "cannot open"));
}

TEST(SafetensorsRejects, BadJsonAndNonObject) {
  EXPECT_TRUE(contains(open_error(R"({"a": )", ""), "header: invalid JSON"));
  EXPECT_TRUE(contains(open_error("[1]", ""), "header: expected a JSON object"));
  EXPECT_TRUE(contains(open_error(R"({"a": 3})", ""), "a: expected an object"));
  EXPECT_TRUE(contains(open_error(R"({"__metadata__": {"k": 1}})", ""), "__metadata__"));
}

TEST(SafetensorsRejects, UnknownDtype) {
  const std::string msg = open_error(R"({"t":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", std::string(8, '\0'));
  EXPECT_TRUE(contains(msg, "bad.safetensors: t: dtype I64 not supported (expected F16, BF16 or F32)")) << msg;
}

TEST(SafetensorsRejects, ShapeAndOffsets) {
  const std::string d8(8, '\0');
  std::string msg = open_error(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", d8);
  EXPECT_TRUE(contains(msg, "t: data_offsets [0,8] span 8 bytes but shape [3] of F32 needs 12")) << msg;
  msg = open_error(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", d8);
  EXPECT_TRUE(contains(msg, "t: shape entry -2")) << msg;
  msg = open_error(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", d8);
  EXPECT_TRUE(contains(msg, "begin > end")) << msg;
  msg = open_error(R"({"t":{"dtype":"F32","shape":[2]}})", d8);
  EXPECT_TRUE(contains(msg, "t: data_offsets")) << msg;
  msg = open_error(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", d8 + "xx");
  EXPECT_TRUE(contains(msg, "trailing garbage: 2 bytes")) << msg;
}

TEST(SafetensorsRejects, OverlappingTensors) {
  const std::string msg = open_error(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                                     std::string(16, '\0'));
  EXPECT_TRUE(contains(msg, "b: data overlaps tensor a")) << msg;
}

TEST(SafetensorsRejects, TruncatedFile) {
  const fs::path p = temp_dir() / "t.safetensors";
  write_safetensors(p, {{"w", Dtype::f32, {4, 4}, std::vector<float>(16, 1.0f)}});
  const std::string bytes = slurp(p);
  spit(p, bytes.substr(0, bytes.size() - 5));
  const std::string msg = open_error(p);
  EXPECT_TRUE(contains(msg, "truncated: header needs " + std::to_string(bytes.size()) + " bytes, file has " +
                                std::to_string(bytes.size() - 5)))
      << msg;
}

namespace {

// An index + two shards: a and b in shard 1, c in shard 2.
fs::path sharded_checkpoint() {
  const fs::path d = temp_dir();
  write_safetensors(d / "model-00001-of-00002.safetensors",
                    {{"a", Dtype::f32, {2, 3}, {1, 2, 3, 4, 5, 6}}, {"b", Dtype::f16, {2}, {7, 8}}});
  write_safetensors(d / "model-00002-of-00002.safetensors", {{"c", Dtype::bf16, {1}, {9}}});
  std::ofstream(d / "model.safetensors.index.json")
      << R"({"metadata": {"total_size": 18}, "weight_map": {"a": "model-00001-of-00002.safetensors",
         "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})";
  return d;
}

std::string checkpoint_error(const fs::path& d) {
  try {
    (void)Checkpoint::open(d);
  } catch (const LoadError& e) {
    return e.what();
  }
  return "<no LoadError>";
}

}  // namespace

TEST(Checkpoint, SingleFile) {
  const fs::path d = temp_dir();
  write_safetensors(d / "model.safetensors", {{"x", Dtype::f32, {2, 1}, {1, 2}}});
  const Checkpoint c = Checkpoint::open(d);
  EXPECT_TRUE(c.has("x"));
  EXPECT_FALSE(c.has("y"));
  EXPECT_EQ(c.get("x", {2, 1}).to_float(), (std::vector<float>{1, 2}));
  EXPECT_EQ(c.names(), std::vector<std::string>{"x"});
  try {
    (void)c.get("x", {1, 2});
    ADD_FAILURE() << "shape mismatch accepted";
  } catch (const LoadError& e) {
    EXPECT_EQ(std::string(e.what()), (d / "model.safetensors").string() + ": x: shape [2, 1] (expected [1, 2])");
  }
  try {
    (void)c.get("y", {1});
    ADD_FAILURE() << "missing tensor accepted";
  } catch (const LoadError& e) {
    EXPECT_EQ(std::string(e.what()), (d / "model.safetensors").string() + ": y: missing tensor");
  }
}

TEST(Checkpoint, ShardedIndex) {
  const fs::path d = sharded_checkpoint();
  const Checkpoint c = Checkpoint::open(d);
  EXPECT_EQ(c.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(c.get("a", {2, 3}).to_float(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(c.get("b", {2}).to_float(), (std::vector<float>{7, 8}));
  EXPECT_EQ(c.get("c", {1}).to_float(), (std::vector<float>{9}));
  EXPECT_TRUE(contains(c.describe(), "model-00002-of-00002.safetensors")) << c.describe();
  try {
    (void)c.get("c", {2});
    ADD_FAILURE();
  } catch (const LoadError& e) {
    EXPECT_EQ(std::string(e.what()),
              (d / "model-00002-of-00002.safetensors").string() + ": c: shape [1] (expected [2])");
  }
  try {
    (void)c.get("zz", {1});
    ADD_FAILURE();
  } catch (const LoadError& e) {
    EXPECT_EQ(std::string(e.what()), (d / "model.safetensors.index.json").string() + ": zz: missing tensor");
  }
}

TEST(Checkpoint, MissingShardMissingTensorAndEmptyFolder) {
  fs::path d = sharded_checkpoint();
  fs::remove(d / "model-00002-of-00002.safetensors");
  std::string msg = checkpoint_error(d);
  EXPECT_TRUE(contains(msg, "model.safetensors.index.json: c: shard model-00002-of-00002.safetensors does not exist"))
      << msg;
  d = sharded_checkpoint();
  write_safetensors(d / "model-00002-of-00002.safetensors", {{"other", Dtype::f32, {1}, {0}}});
  msg = checkpoint_error(d);
  EXPECT_TRUE(contains(msg, "model.safetensors.index.json: c: listed in weight_map but missing from shard")) << msg;
  d = temp_dir();
  EXPECT_EQ(checkpoint_error(d), d.string() + ": no model.safetensors or model.safetensors.index.json");
}
