// Unit tests of the JSONL result store (append + fsync, resume by key, a torn last line dropped) and --shard parsing.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <csignal>
#include <fstream>
#include <set>

#include "bad_input_message.hpp"
#include "kvconf/protocol/bad_input.hpp"
#include "kvconf/protocol/result_store.hpp"
#include "temp_dir.hpp"

namespace kvconf::protocol {
namespace {

std::string key_of(const nlohmann::json& j) { return j.at("k").get<std::string>(); }

void write_text(const std::filesystem::path& p, const std::string& s) {
  std::ofstream o(p, std::ios::binary | std::ios::trunc);
  o << s;
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream i(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(i), {});
}

TEST(JsonlStore, AppendsOneLinePerRecordAndResumes) {
  const auto f = test::temp_dir("kvconf_store") / "pairs.jsonl";
  {
    JsonlStore s(f, false, key_of);
    s.append({{"k", "a"}, {"v", 1}});
    s.append({{"k", "b"}, {"v", 2}});
    EXPECT_TRUE(s.has("a"));
    EXPECT_FALSE(s.has("c"));
  }
  EXPECT_EQ(read_text(f), "{\"k\":\"a\",\"v\":1}\n{\"k\":\"b\",\"v\":2}\n");
  JsonlStore r(f, true, key_of);
  EXPECT_TRUE(r.has("a"));
  EXPECT_TRUE(r.has("b"));
  EXPECT_FALSE(r.dropped_torn_line());
  ASSERT_EQ(r.records().size(), 2u);
  r.append({{"k", "c"}, {"v", 3}});
  EXPECT_EQ(read_jsonl(f).size(), 3u);
}

TEST(JsonlStore, ExistingFileWithoutResumeIsBadInput) {
  const auto f = test::temp_dir("kvconf_store") / "pairs.jsonl";
  write_text(f, "{\"k\":\"a\"}\n");
  const std::string m = bad_input([&] { JsonlStore s(f, false, key_of); });
  EXPECT_NE(m.find("--resume"), std::string::npos) << "opened a finished run's file without --resume, or: " << m;
}

TEST(JsonlStore, TornLastLineIsDroppedOnResume) {
  const auto f = test::temp_dir("kvconf_store") / "pairs.jsonl";
  write_text(f, "{\"k\":\"a\"}\n{\"k\":\"b\"}\n{\"k\":\"c\",\"v\":[1,2");  // killed while writing c
  JsonlStore s(f, true, key_of);
  EXPECT_TRUE(s.dropped_torn_line());
  EXPECT_TRUE(s.has("b"));
  EXPECT_FALSE(s.has("c"));
  s.append({{"k", "c"}});
  EXPECT_EQ(read_text(f), "{\"k\":\"a\"}\n{\"k\":\"b\"}\n{\"k\":\"c\"}\n");
}

// The torn tail is cut off in place: the finished records' bytes are never rewritten (a kill during the resume itself
// cannot lose them), even where their text is not what dump() would write.
TEST(JsonlStore, TornTailIsCutWithoutRewritingFinishedRecords) {
  const auto f = test::temp_dir("kvconf_store") / "pairs.jsonl";
  write_text(f, "{\"k\": \"a\"}\n{ \"k\":\"b\" }\n{\"k\":\"c\",\"v\":[1");
  {
    JsonlStore s(f, true, key_of);
    EXPECT_TRUE(s.dropped_torn_line());
  }
  EXPECT_EQ(read_text(f), "{\"k\": \"a\"}\n{ \"k\":\"b\" }\n");
}

// A last record that is whole but lacks its newline is kept, and the next record starts on a line of its own.
TEST(JsonlStore, WholeLastRecordWithoutNewlineIsKept) {
  const auto f = test::temp_dir("kvconf_store") / "pairs.jsonl";
  write_text(f, "{\"k\":\"a\"}\n{\"k\":\"b\"}");
  JsonlStore s(f, true, key_of);
  EXPECT_FALSE(s.dropped_torn_line());
  EXPECT_TRUE(s.has("b"));
  s.append({{"k", "c"}});
  EXPECT_EQ(read_text(f), "{\"k\":\"a\"}\n{\"k\":\"b\"}\n{\"k\":\"c\"}\n");
}

// A write that fails part-way (here the file-size limit, as a full disk would) leaves no torn line: the file is cut
// back to the finished records, the error names the file, and the record is not counted as done.
TEST(JsonlStore, FailedAppendLeavesNoTornLine) {
  const auto f = test::temp_dir("kvconf_store") / "pairs.jsonl";
  const std::string big(4096, 'x');
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  std::string what;
  {
    JsonlStore s(f, false, key_of);
    s.append({{"k", "a"}});
    rlimit lim = old;
    lim.rlim_cur = 1000;  // the next record (4 KiB) is written in part, then write() fails with EFBIG
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &lim), 0);
    try {
      s.append({{"k", "b"}, {"v", big}});
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
    EXPECT_FALSE(s.has("b"));
  }
  EXPECT_NE(what.find("pairs.jsonl"), std::string::npos) << "no error naming the file: '" << what << "'";
  EXPECT_EQ(read_text(f), "{\"k\":\"a\"}\n") << "a torn record was left behind";
  JsonlStore r(f, true, key_of);
  EXPECT_FALSE(r.dropped_torn_line());
  EXPECT_TRUE(r.has("a"));
  EXPECT_FALSE(r.has("b"));
}

TEST(JsonlStore, CorruptLineInTheMiddleNamesFileAndLine) {
  const auto f = test::temp_dir("kvconf_store") / "pairs.jsonl";
  write_text(f, "{\"k\":\"a\"}\nnot json\n{\"k\":\"c\"}\n");
  const std::string m = bad_input([&] { JsonlStore s(f, true, key_of); });
  EXPECT_NE(m.find("pairs.jsonl line 2"), std::string::npos) << "accepted a corrupt line, or: " << m;
  EXPECT_THROW(read_jsonl(f), BadInput);
}

TEST(JsonlStore, UnwritableFolderIsBadInput) {
  const auto d = test::temp_dir("kvconf_store");
  EXPECT_THROW(JsonlStore(d / "no-such-folder" / "pairs.jsonl", false, key_of), BadInput);
}

// Two writers on one results file would interleave records: the second is refused while the first holds it.
TEST(JsonlStore, SecondWriterOnTheSameFileIsRefused) {
  const auto f = test::temp_dir("kvconf_store") / "pairs.jsonl";
  {
    JsonlStore first(f, false, key_of);
    first.append({{"k", "a"}});
    const std::string m = bad_input([&] { JsonlStore second(f, true, key_of); });
    EXPECT_NE(m.find("another kvconf process"), std::string::npos) << "a second writer was allowed, or: " << m;
  }
  JsonlStore after(f, true, key_of);  // released with the first store
  EXPECT_TRUE(after.has("a"));
}

TEST(Shard, ParsesAndPartitions) {
  const Shard s = parse_shard("1/3");
  EXPECT_EQ(s.index, 1u);
  EXPECT_EQ(s.count, 3u);
  EXPECT_EQ(s.str(), "1/3");
  std::set<std::size_t> all;
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t item = 0; item < 10; ++item)
      if (parse_shard(std::to_string(i) + "/3").owns(item)) {
        EXPECT_TRUE(all.insert(item).second) << item;
      }
  EXPECT_EQ(all.size(), 10u);
  for (const char* bad : {"3/2", "2/2", "1", "a/3", "1/0", "/3", "1/", "-1/3", "1/3x"})
    EXPECT_THROW(parse_shard(bad), BadInput) << bad;
}

}  // namespace
}  // namespace kvconf::protocol
