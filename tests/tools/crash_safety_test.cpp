// Crash safety of `kvconf model` and `kvconf run` (docs/CRASH_SAFETY.md): SIGKILL at random points then --resume
// until done (the results equal an uninterrupted run's; no finished pair lost or duplicated; no report file torn),
// a disk that fills up mid-run (fail_writes_shim.c) and a read-only output folder (a clear one-line error, nothing
// torn, resumable). KVCONF_SEED overrides the kill delays' seed, KVCONF_CRASH_TRIALS the number of trials.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <random>
#include <set>

#include "crash_support.hpp"
#include "kvconf/results/records.hpp"
#include "temp_dir.hpp"

namespace kvconf::crash {
namespace {

std::string pair_key(const nlohmann::json& j) { return results::run_pair_from_json(j).key(); }
std::string kernel_key(const nlohmann::json& j) { return results::kernel_case_from_json(j).key(); }

struct Scenario {
  std::string name;
  std::vector<std::string> args;                      // without --out and --resume
  std::vector<std::pair<std::string, KeyOf>> stores;  // result stores, relative to --out
};

// kvconf model on llama2-tiny: 8 pairs of 16 steps (about 5 s).
Scenario model_scenario() {
  return {"kvconf model",
          {"model", "--model", "fixture:llama2-tiny", "--profile", "fp16-eager", "--n", "2", "--seeds", "0-1",
           "--strategies", "greedy,topk", "--max-new-tokens", "16"},
          {{"pairs.jsonl", pair_key}}};
}
// kvconf run on the 27 eager-attention kernel items (kernels.jsonl, the report of the sweep; about 2 s).
Scenario run_kernels_scenario() {
  return {"kvconf run (kernels)", {"run", "--filter", "cpu.attn.a6"}, {{"kernels.jsonl", kernel_key}}};
}
// kvconf run on the llama2-tiny fixture: 30 pairs over every CPU profile and a report per profile (about 35 s).
Scenario run_model_scenario() {
  return {
      "kvconf run (llama2-tiny)", {"run", "--filter", "llama2-tiny"}, {{"models/llama2-tiny/pairs.jsonl", pair_key}}};
}

std::uint64_t seed() {
  const char* s = std::getenv("KVCONF_SEED");
  return s ? std::strtoull(s, nullptr, 10) : 20261125u;
}

int trials_or(int n) {
  const char* s = std::getenv("KVCONF_CRASH_TRIALS");
  return s ? std::atoi(s) : n;
}

std::vector<std::string> with_out(const Scenario& s, const fs::path& out, bool resume) {
  std::vector<std::string> a = s.args;
  a.insert(a.end(), {"--out", out.string()});
  if (resume) a.push_back("--resume");
  return a;
}

// The uninterrupted run: its stores and report, and how long it took.
struct Reference {
  fs::path dir;
  std::vector<Store> stores;
  nlohmann::json report;
  int status = -1;
  double seconds = 0.0;
  double report_at = -1.0;  // when report.json appeared: the report files are written from about then to the end
};

Reference reference_run(const Scenario& s, const fs::path& base) {
  Reference r;
  r.dir = base / "reference";
  Launch l{with_out(s, r.dir, false), base / "reference.log"};
  l.watch = r.dir / "report.json";
  const Exit e = run_kvconf(l);
  r.report_at = e.watch_seen;
  EXPECT_FALSE(e.killed) << s.name << ": the reference run hung\n" << read_text(base / "reference.log");
  EXPECT_TRUE(e.status == 0 || e.status == 1) << s.name << ": exit " << e.status << "\n"
                                              << read_text(base / "reference.log");
  r.status = e.status;
  r.seconds = e.seconds;
  for (const auto& [file, key] : s.stores) {
    r.stores.push_back(read_store(r.dir / file, key));
    EXPECT_FALSE(r.stores.back().records.empty()) << s.name << ": the reference wrote no record to " << file;
  }
  r.report = without_timing(nlohmann::json::parse(read_text(r.dir / "report.json")));
  return r;
}

// What a folder holds now, checked against the reference: every record one of the reference's, with the same
// content, at most once; no report file torn. Returns the records' keys (per store) for the "never lost" check.
std::vector<std::set<std::string>> check_partial(const Scenario& s, const Reference& ref, const fs::path& dir,
                                                 const std::string& when, std::size_t& torn_tails) {
  std::vector<std::set<std::string>> keys;
  for (std::size_t i = 0; i < s.stores.size(); ++i) {
    const Store st = read_store(dir / s.stores[i].first, s.stores[i].second);
    torn_tails += st.torn_tail;
    for (const std::string& p : st.problems) ADD_FAILURE() << when << ": " << p;
    std::set<std::string> k;
    for (const auto& [key, rec] : st.records) {
      k.insert(key);
      const auto it = ref.stores[i].records.find(key);
      if (it == ref.stores[i].records.end())
        ADD_FAILURE() << when << ": " << s.stores[i].first << " holds " << key << ", which the reference has not";
      else if (it->second != rec)
        ADD_FAILURE() << when << ": " << s.stores[i].first << " record " << key << " differs from the reference's";
    }
    keys.push_back(std::move(k));
  }
  for (const std::string& t : torn_reports(dir, ref.dir)) ADD_FAILURE() << when << ": torn report file " << t;
  return keys;
}

// The finished folder equals the reference: the same records (none lost, none twice), the same report.
void check_final(const Scenario& s, const Reference& ref, const fs::path& dir, const std::string& when,
                 std::size_t& lost, std::size_t& duplicates) {
  for (std::size_t i = 0; i < s.stores.size(); ++i) {
    const Store st = read_store(dir / s.stores[i].first, s.stores[i].second);
    for (const std::string& p : st.problems) {
      ADD_FAILURE() << when << ": " << p;
      duplicates += p.find("duplicate") != std::string::npos;
    }
    EXPECT_FALSE(st.torn_tail) << when << ": " << s.stores[i].first << " ends in a torn line";
    for (const auto& [key, rec] : ref.stores[i].records) {
      const auto it = st.records.find(key);
      if (it == st.records.end()) {
        ++lost;
        ADD_FAILURE() << when << ": " << key << " is missing from " << s.stores[i].first;
      } else if (it->second != rec) {
        ADD_FAILURE() << when << ": " << s.stores[i].first << " record " << key << " differs from the reference's";
      }
    }
    EXPECT_EQ(st.records.size(), ref.stores[i].records.size()) << when << ": " << s.stores[i].first;
  }
  nlohmann::json report;
  try {
    report = without_timing(nlohmann::json::parse(read_text(dir / "report.json")));
  } catch (const std::exception& e) {
    ADD_FAILURE() << when << ": report.json: " << e.what();
  }
  EXPECT_TRUE(report == ref.report) << when << ": report.json differs from the uninterrupted run's (timing aside)";
  for (const std::string& t : torn_reports(dir, ref.dir)) ADD_FAILURE() << when << ": torn report file " << t;
}

// `trials` runs of the scenario, each killed with SIGKILL up to `max_kills` times, resumed with --resume after each
// kill, then run to the end. The first launch of every even trial is killed by progress: once the first result store
// has a random number of new lines, after a random part of one record's time (so some kills land mid-run whatever
// the machine's load; timed kills alone missed the run on a busy CI machine where the reference took 4x its usual
// time). Other launches are killed at a uniformly random point between their start and their expected end (the
// reference's time, scaled down by the share of records already finished); the first launch of every odd trial at a
// random point of the reference's last stretch, from just before report.json appeared to its end, where the report
// files are written.
void kill_trials(const Scenario& s, int trials, int max_kills) {
  const fs::path base = test::temp_dir("kvconf_crash");
  const Reference ref = reference_run(s, base);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::uint64_t sd = seed();
  std::mt19937_64 rng(sd);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double tail_from = ref.report_at > 0 ? std::max(0.0, ref.report_at - 0.05 * ref.seconds) : 0.0;
  std::size_t kills = 0, mid_run = 0, lost = 0, duplicates = 0, torn_tails = 0, leftovers = 0, records_at_kill = 0;
  for (int t = 0; t < trials && !::testing::Test::HasFatalFailure(); ++t) {
    const fs::path dir = base / ("trial-" + std::to_string(t));
    std::vector<std::set<std::string>> before(s.stores.size());
    for (int launch = 0;; ++launch) {
      const bool kill = launch < max_kills;
      std::size_t done = 0, all = 0;
      for (std::size_t i = 0; i < before.size(); ++i) {
        done += before[i].size();
        all += ref.stores[i].records.size();
      }
      const double expected = ref.seconds * std::max(0.2, 1.0 - static_cast<double>(done) / static_cast<double>(all));
      const bool tail = launch == 0 && t % 2 == 1;
      const fs::path store = dir / s.stores.front().first;
      const std::size_t lines_now = count_lines(store), left = all - std::min(done, all);
      const bool by_progress = kill && launch == 0 && t % 2 == 0 && left >= 2;
      const double u = unit(rng);
      const double delay = !kill ? -1.0 : tail ? tail_from + u * (ref.seconds - tail_from) : u * expected;
      Launch l{with_out(s, dir, launch > 0), dir.string() + ".log", {}, delay};
      if (by_progress) {  // after a random number of records, plus a random part of one record's time
        l.kill_file = store;
        l.kill_lines = lines_now + 1 + static_cast<std::size_t>(u * static_cast<double>(left - 1));
        l.kill_extra = unit(rng) * ref.seconds / static_cast<double>(all);
      }
      const std::string when = s.name + " trial " + std::to_string(t) + " launch " + std::to_string(launch) +
                               (by_progress ? " killed " + std::to_string(l.kill_extra) + " s after line " +
                                                  std::to_string(l.kill_lines) + " of " + store.filename().string()
                                : kill ? " killed at " + std::to_string(delay) + " s"
                                       : "") +
                               " (seed " + std::to_string(sd) + ", KVCONF_SEED)";
      const Exit e = run_kvconf(l);
      if (!e.killed) {
        ASSERT_EQ(e.status, ref.status) << when << ": ended with " << e.status << " (signal " << e.signal << ")\n"
                                        << read_text(dir.string() + ".log");
        break;
      }
      ++kills;
      const auto now = check_partial(s, ref, dir, when, torn_tails);
      std::size_t n = 0;
      for (std::size_t i = 0; i < now.size(); ++i) {
        for (const std::string& k : before[i])
          if (!now[i].count(k)) {
            ++lost;
            ADD_FAILURE() << when << ": " << k << " was finished before this launch and is gone";
          }
        n += now[i].size();
      }
      records_at_kill += n;
      mid_run += n > 0 && n < all;
      before = now;
    }
    leftovers += temp_leftovers(dir);
    check_final(s, ref, dir, s.name + " trial " + std::to_string(t) + " (seed " + std::to_string(sd) + ")", lost,
                duplicates);
  }
  std::printf(
      "crash figures: %s: %d trials, %zu kills (%zu with some but not all records finished; %zu records on "
      "disk at the kills), torn last lines %zu, pairs lost %zu, duplicated %zu, temporaries left by kills %zu; "
      "reference run %.2f s (report.json at %.2f s); seed %llu\n",
      s.name.c_str(), trials, kills, mid_run, records_at_kill, torn_tails, lost, duplicates, leftovers, ref.seconds,
      ref.report_at, static_cast<unsigned long long>(sd));
  ::testing::Test::RecordProperty("kills", static_cast<int>(kills));
  ::testing::Test::RecordProperty("lost", static_cast<int>(lost));
  ::testing::Test::RecordProperty("duplicated", static_cast<int>(duplicates));
  EXPECT_GT(mid_run, 0u) << "no kill landed while records were being written: the delays miss the run";
}

TEST(CrashSafety, ModelSurvivesKill9) { kill_trials(model_scenario(), trials_or(10), 3); }
TEST(CrashSafety, RunKernelsSurvivesKill9) { kill_trials(run_kernels_scenario(), trials_or(10), 3); }
TEST(CrashSafety, RunModelsSurvivesKill9) { kill_trials(run_model_scenario(), std::max(1, trials_or(10) / 10), 4); }

// Kills that land inside a write: the first launch of each trial SIGKILLs itself in the middle of its N-th write() to a
// file (fail_writes_shim.c: half the bytes written, then kill -9), N drawn over all the writes of an uninterrupted run
// (every other trial among its last 12: the report files and manifests); then --resume runs to the end.
void write_kill_trials(const Scenario& s, int trials) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the LD_PRELOAD write shim cannot load before the ASan runtime";
#endif
  const fs::path base = test::temp_dir("kvconf_crash");
  const Reference ref = reference_run(s, base);
  ASSERT_FALSE(::testing::Test::HasFailure());
  Launch count{with_out(s, base / "counted", false), base / "counted.log"};
  count.env = {{"LD_PRELOAD", KVCONF_FAIL_WRITES_SHIM}, {"KVCONF_COUNT_WRITES_TO", (base / "writes").string()}};
  ASSERT_EQ(run_kvconf(count).status, ref.status) << read_text(base / "counted.log");
  const long long writes = std::atoll(read_text(base / "writes").c_str());
  ASSERT_GT(writes, 12) << "the write shim counted no writes: not loaded?";
  const std::uint64_t sd = seed();
  std::mt19937_64 rng(sd);
  std::size_t killed = 0, lost = 0, duplicates = 0, torn = 0;
  for (int t = 0; t < trials; ++t) {
    const long long from = t % 2 ? writes - 11 : 1;
    const long long n = std::uniform_int_distribution<long long>(from, writes)(rng);
    const fs::path dir = base / ("trial-" + std::to_string(t));
    const std::string when = s.name + " killed inside write " + std::to_string(n) + " of " + std::to_string(writes) +
                             " (seed " + std::to_string(sd) + ", KVCONF_SEED)";
    Launch l{with_out(s, dir, false), dir.string() + ".log"};
    l.env = {{"LD_PRELOAD", KVCONF_FAIL_WRITES_SHIM}, {"KVCONF_KILL_AT_WRITE", std::to_string(n)}};
    const Exit e = run_kvconf(l);
    killed += e.signal == SIGKILL;
    check_partial(s, ref, dir, when, torn);
    const Exit done = run_kvconf({with_out(s, dir, true), dir.string() + ".log"});
    EXPECT_EQ(done.status, ref.status) << when << ", then --resume:\n" << read_text(dir.string() + ".log");
    check_final(s, ref, dir, when + ", then --resume", lost, duplicates);
  }
  std::printf(
      "crash figures: %s killed inside a write: %d trials over %lld writes, %zu killed (the others wrote "
      "less than their N), torn last lines %zu, pairs lost %zu, duplicated %zu; seed %llu\n",
      s.name.c_str(), trials, writes, killed, torn, lost, duplicates, static_cast<unsigned long long>(sd));
  EXPECT_GT(killed, 0u);
}

TEST(CrashSafety, ModelKilledInsideAWrite) { write_kill_trials(model_scenario(), trials_or(6)); }
TEST(CrashSafety, RunKilledInsideAWrite) { write_kill_trials(run_kernels_scenario(), trials_or(6)); }

// The checks themselves fail on what they are meant to catch: a duplicated record, a record that differs, a torn
// last line, report files cut short (a finished run of kvconf model, then each fault planted in a copy).
TEST(CrashSafety, ChecksCatchPlantedFaults) {
  const Scenario s = model_scenario();
  const fs::path base = test::temp_dir("kvconf_crash");
  const Reference ref = reference_run(s, base);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::string pairs = read_text(ref.dir / "pairs.jsonl");
  const std::string first = pairs.substr(0, pairs.find('\n') + 1);
  const auto planted = [&](const std::string& name, const std::string& file, const std::string& text) {
    const fs::path dir = base / name;
    fs::copy(ref.dir, dir, fs::copy_options::recursive);
    std::ofstream(dir / file, std::ios::binary | std::ios::trunc) << text;
    std::size_t torn = 0, lost = 0, dup = 0;
    ::testing::TestPartResultArray failures;
    {
      const ::testing::ScopedFakeTestPartResultReporter catcher(
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
      check_final(s, ref, dir, name, lost, dup);
      check_partial(s, ref, dir, name, torn);
    }
    EXPECT_GT(failures.size(), 0) << "the checks missed the planted fault: " << name;
    return std::make_pair(lost, dup);
  };
  EXPECT_EQ(planted("duplicate", "pairs.jsonl", pairs + first).second, 1u);
  EXPECT_EQ(planted("lost", "pairs.jsonl", pairs.substr(first.size())).first, 1u);
  std::string changed = pairs;
  changed.insert(1, "\"extra\":1,");
  planted("changed", "pairs.jsonl", changed);
  planted("torn-line", "pairs.jsonl", pairs + first.substr(0, first.size() / 2));
  for (const std::string f : {"report.json", "report.md", "report.html", "junit.xml", "manifest.json"}) {
    const std::string text = read_text(ref.dir / f);
    planted("torn-" + f, f, text.substr(0, text.size() - text.size() / 3));
  }
}

// ---- A full disk and a read-only folder. ----

// The error is one line: stderr's last line, and no other line says `what` (the lines before it are the progress
// lines that kvconf model writes to a stderr that is not a terminal).
bool one_error_line(const std::string& err, const std::string& what) {
  std::string body = err;
  while (!body.empty() && body.back() == '\n') body.pop_back();
  const std::size_t nl = body.rfind('\n');
  const std::string last = body.substr(nl == std::string::npos ? 0 : nl + 1);
  return !last.empty() && last.find(what) != std::string::npos &&
         body.find(what) == body.size() - last.size() + last.find(what);
}

std::uintmax_t bytes_under(const fs::path& dir) {
  std::uintmax_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) n += e.file_size();
  return n;
}

Launch full_disk(const Scenario& s, const fs::path& dir, bool resume, std::uintmax_t budget) {
  Launch l{with_out(s, dir, resume), dir.string() + ".log", dir.string() + ".err"};
  l.env = {{"LD_PRELOAD", KVCONF_FAIL_WRITES_SHIM}, {"KVCONF_FAIL_WRITES_AFTER", std::to_string(budget)}};
  return l;
}

// The disk fills up after a fraction of what the run writes: a clear one-line error naming a file in --out (exit 1,
// or 2 where it is the manifest), no torn file, no temporary left, nothing finished lost; still full, --resume fails
// the same way and changes nothing; once there is space, --resume finishes with the reference's results.
void disk_full(const Scenario& s, const std::vector<double>& fractions) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the LD_PRELOAD write shim cannot load before the ASan runtime";
#endif
  const fs::path base = test::temp_dir("kvconf_crash");
  const Reference ref = reference_run(s, base);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::uintmax_t total = bytes_under(ref.dir);
  std::size_t lost = 0, duplicates = 0, torn = 0;
  for (std::size_t i = 0; i < fractions.size(); ++i) {
    const auto budget = static_cast<std::uintmax_t>(fractions[i] * static_cast<double>(total));
    const fs::path dir = base / ("full-" + std::to_string(i));
    const std::string when =
        s.name + " with the disk full after " + std::to_string(budget) + " of " + std::to_string(total) + " bytes";
    const Exit e = run_kvconf(full_disk(s, dir, false, budget));
    const std::string err = read_text(dir.string() + ".err");
    EXPECT_TRUE(!e.killed && e.signal == 0 && (e.status == 1 || e.status == 2))
        << when << ": exit " << e.status << " signal " << e.signal << "\n"
        << err;
    EXPECT_TRUE(one_error_line(err, "No space left on device")) << when << ": not one error line:\n" << err;
    EXPECT_NE(err.find(dir.string()), std::string::npos) << when << ": the error names no file in --out: " << err;
    check_partial(s, ref, dir, when, torn);
    EXPECT_EQ(temp_leftovers(dir), 0u) << when << ": a temporary file was left";
    if (i == fractions.size() / 2) {  // still full: --resume fails the same way and changes nothing
      const auto snap = snapshot(dir);
      const Exit again = run_kvconf(full_disk(s, dir, true, 0));
      const std::string err2 = read_text(dir.string() + ".err");
      EXPECT_TRUE(!again.killed && (again.status == 1 || again.status == 2) &&
                  one_error_line(err2, "No space left on device"))
          << when << ", --resume while still full: exit " << again.status << "\n"
          << err2;
      const auto snap2 = snapshot(dir);
      for (const auto& [f, text] : snap) {
        if (f.find("pairs.jsonl") == std::string::npos && f.find("kernels.jsonl") == std::string::npos) continue;
        EXPECT_EQ(snap2.count(f) ? snap2.at(f) : "", text) << when << ": --resume while still full changed " << f;
      }
    }
    const Exit done = run_kvconf({with_out(s, dir, true), dir.string() + ".log"});
    EXPECT_EQ(done.status, ref.status) << when << ", then --resume with space:\n" << read_text(dir.string() + ".log");
    check_final(s, ref, dir, when + ", then --resume", lost, duplicates);
  }
  std::printf(
      "crash figures: %s with a full disk: %zu fill points, torn last lines %zu, pairs lost %zu, duplicated "
      "%zu\n",
      s.name.c_str(), fractions.size(), torn, lost, duplicates);
  EXPECT_EQ(torn, 0u) << "a full disk left a torn line in a result store";
}

TEST(CrashSafety, ModelOnAFullDisk) { disk_full(model_scenario(), {0.0, 0.01, 0.3, 0.6, 0.9, 0.995}); }
TEST(CrashSafety, RunOnAFullDisk) { disk_full(run_kernels_scenario(), {0.0, 0.1, 0.5, 0.9, 0.99}); }

// Makes `dir` read-only for the launches that get the returned wrapper: as root (whom file modes do not stop) a
// read-only bind mount in a private mount namespace (unshare -m); otherwise chmod a-w on the folder and its files.
std::vector<std::string> read_only(const fs::path& dir, bool on, std::string& how) {
  if (::geteuid() == 0) {
    how = "a read-only bind mount (unshare -m)";
    return {"unshare", "-m", "sh", "-c", "mount --bind -o ro \"$0\" \"$0\" && exec \"$@\"", dir.string()};
  }
  how = "chmod a-w";
  const auto perms = on ? fs::perm_options::remove : fs::perm_options::add;
  for (const auto& e : fs::recursive_directory_iterator(dir)) fs::permissions(e.path(), fs::perms::owner_write, perms);
  fs::permissions(dir, fs::perms::owner_write, perms);
  return {};
}

// A finished-in-part run whose folder turns read-only: --resume exits 2 with one line naming the folder's file and
// changes nothing; a new --out inside it likewise; writable again, --resume finishes with the reference's results.
void read_only_folder(const Scenario& s) {
  const fs::path base = test::temp_dir("kvconf_crash");
  if (::geteuid() == 0 && std::system("unshare -m true >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "running as root (file modes do not stop root) and unshare -m is not allowed here";
  const Reference ref = reference_run(s, base);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const fs::path dir = base / "ro";
  // A run cut off part-way (SIGKILL at half the reference's time), so the folder holds some finished records.
  run_kvconf({with_out(s, dir, false), dir.string() + ".log", {}, ref.seconds / 2});
  std::string how;
  const auto wrapper = read_only(dir, true, how);
  const auto snap = snapshot(dir);
  for (const auto& [sub, resume] : {std::pair<std::string, bool>{"", true}, {"new", false}}) {
    const fs::path out = sub.empty() ? dir : dir / sub;
    Launch l{with_out(s, out, resume), base / "ro-attempt.log", base / "ro-attempt.err"};
    l.wrapper = wrapper;
    const Exit e = run_kvconf(l);
    const std::string err = read_text(base / "ro-attempt.err");
    const std::string when =
        s.name + " in a read-only folder (" + how + ")" + (resume ? " with --resume" : ", a new --out in it");
    EXPECT_TRUE(!e.killed && e.status == 2) << when << ": exit " << e.status << " signal " << e.signal << "\n" << err;
    EXPECT_TRUE(one_error_line(err, ::geteuid() == 0 ? "Read-only file system" : "Permission denied"))
        << when << ": not one error line:\n"
        << err;
    EXPECT_NE(err.find(out.string()), std::string::npos) << when << ": the error does not name " << out << ": " << err;
    std::printf("read-only: %s: exit %d: %s", when.c_str(), e.status, err.c_str());
  }
  read_only(dir, false, how);
  EXPECT_TRUE(snapshot(dir) == snap) << s.name << ": a refused run in a read-only folder changed it";
  const Exit done = run_kvconf({with_out(s, dir, true), dir.string() + ".log"});
  EXPECT_EQ(done.status, ref.status) << read_text(dir.string() + ".log");
  std::size_t lost = 0, duplicates = 0;
  check_final(s, ref, dir, s.name + " resumed after the folder was writable again", lost, duplicates);
}

TEST(CrashSafety, ModelInAReadOnlyFolder) { read_only_folder(model_scenario()); }
TEST(CrashSafety, RunInAReadOnlyFolder) { read_only_folder(run_kernels_scenario()); }

}  // namespace
}  // namespace kvconf::crash
