// Golden pins what it records: every field of every committed baseline (golden/baselines/<device>/*.json), changed
// alone, is reported by golden::check (what `kvconf golden check` runs) as a change naming that field; the fields the
// comparison deliberately leaves alone are listed below with the reason, and the list is checked to be exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kvconf/golden/golden.hpp"

namespace kvconf::golden {
namespace {

using nlohmann::json;
using results::CheckResult;
using results::KernelCaseRecord;
using results::OnOffDiff;
using results::RunPairRecord;

const std::filesystem::path kBaselines = KVCONF_GOLDEN_BASELINES;  // golden/baselines: one folder per device

// A recorded field that golden::check does not report when it alone changes, and why. `gpu_band_only`: ignored only
// under a band with deterministic = false (the GPU baselines, docs/GOLDEN.md "Bands").
struct Ignored {
  const char* field;  // its path in the file, array indices as []
  bool gpu_band_only;
  const char* why;
};
const std::vector<Ignored> kIgnored = {
    {"provenance.kvconf_version", false, "who wrote the file: the same results from another build are no change"},
    {"provenance.profile", false, "names the file's run; each token entry's key holds its profile"},
    {"provenance.seed", false, "the run's seed; each token entry's key and each rule's seed pin it per entry"},
    {"provenance.date", false, "when the file was written"},
    {"provenance.command", false, "the command that wrote the file"},
    {"band.error_rel", false, "the comparison's tolerance, not a result: how error, bound and max ulp compare"},
    {"band.deterministic", false, "the comparison's setting, not a result: whether tokens and counts compare"},
    {"tokens[].free_on[]", true, "GPU band: token sequences are recorded, not compared (exp, division not bit-exact)"},
    {"tokens[].free_off[]", true, "GPU band: token sequences are recorded, not compared"},
    {"tokens[].teacher_on[]", true, "GPU band: token sequences are recorded, not compared"},
    {"tokens[].teacher_off[]", true, "GPU band: token sequences are recorded, not compared"},
    {"kernels[].on_off.differing", true, "GPU band: the count of ON/OFF differing elements may move"},
};
// Fields whose change makes the file unreadable (exit 2 naming the field) before anything is compared.
const std::set<std::string> kRefusedOnRead = {"provenance.schema"};  // a file of another schema version

// The file's token arrays are named after the run record's fields, as the changes name them.
const std::map<std::string, std::string> kChangeName = {{"free_on", "free.tokens_on"},
                                                        {"free_off", "free.tokens_off"},
                                                        {"teacher_on", "teacher.tokens_on"},
                                                        {"teacher_off", "teacher.tokens_off"}};

// The run records a baseline entry was built from (token_run_of and kernel_stat_of read backwards);
// BaselinesAreBuiltFromTheirRecords checks the round trip, so a field these miss fails there.
RunPairRecord pair_of(const TokenRun& t) {
  RunPairRecord r;
  std::vector<std::string> part;  // model|profile|strategy|seed|prompt_id, the prompt id taken whole
  std::size_t from = 0;
  for (int i = 0; i < 4; ++i) {
    const auto bar = t.key.find('|', from);
    if (bar == std::string::npos) return r;  // a malformed key: the round trip fails naming it
    part.push_back(t.key.substr(from, bar - from));
    from = bar + 1;
  }
  r.model = part[0];
  r.profile = part[1];
  r.strategy = part[2];
  r.seed = std::stoull(part[3]);
  r.prompt_id = t.key.substr(from);
  r.free.tokens_on = t.free_on;
  r.free.tokens_off = t.free_off;
  r.teacher.tokens_on = t.teacher_on;
  r.teacher.tokens_off = t.teacher_off;
  return r;
}

KernelCaseRecord case_of(const KernelStat& k) {
  KernelCaseRecord r;
  const auto bar = k.key.find('|');
  r.kernel = k.key.substr(0, bar);
  r.case_id = bar == std::string::npos ? "" : k.key.substr(bar + 1);
  r.skipped = k.skipped;
  for (const RuleStat& s : k.rules) {
    CheckResult c;
    c.rule = s.rule;
    c.pass = s.pass;
    c.error = s.error;
    c.bound = s.bound;
    c.seed = s.seed;
    r.rules.push_back(c);
  }
  if (k.on_off_differing) {
    OnOffDiff d;
    d.differing = *k.on_off_differing;
    d.max_ulp = k.on_off_max_ulp.value_or(0.0);
    r.on_off = d;
  }
  return r;
}

struct File {
  std::string name;  // "cpu/kernels.json"
  json text;         // as committed
  Baseline baseline;
  std::vector<RunPairRecord> pairs;
  std::vector<KernelCaseRecord> kernels;
};

const std::vector<File>& files() {
  static const std::vector<File> all = [] {
    std::vector<File> v;
    std::set<std::filesystem::path> paths;  // sorted: a stable order of failures
    for (const auto& dev : std::filesystem::directory_iterator(kBaselines))
      if (dev.is_directory())
        for (const auto& f : std::filesystem::directory_iterator(dev.path()))
          if (f.path().extension() == ".json") paths.insert(f.path());
    for (const auto& p : paths) {
      File f;
      f.name = p.parent_path().filename().string() + "/" + p.filename().string();
      std::ifstream in(p);
      f.text = json::parse(in);
      f.baseline = read_baseline(p);
      for (const TokenRun& t : f.baseline.tokens) f.pairs.push_back(pair_of(t));
      for (const KernelStat& k : f.baseline.kernels) f.kernels.push_back(case_of(k));
      v.push_back(std::move(f));
    }
    return v;
  }();
  return all;
}

std::string join(const std::string& field, const std::string& key) { return field.empty() ? key : field + "." + key; }

// Which fields are null somewhere (optional: on_off of a kernel case without one), and a value each holds elsewhere.
struct Optionals {
  std::set<std::string> nullable;
  std::map<std::string, json> example;
};
void find_nulls(const json& n, const std::string& field, Optionals& o) {
  if (n.is_null()) o.nullable.insert(field);
  if (n.is_object())
    for (const auto& [k, v] : n.items()) find_nulls(v, join(field, k), o);
  if (n.is_array())
    for (const auto& v : n) find_nulls(v, field + "[]", o);
}
void find_examples(const json& n, const std::string& field, Optionals& o) {
  if (!n.is_null() && o.nullable.count(field)) o.example.emplace(field, n);
  if (n.is_object())
    for (const auto& [k, v] : n.items()) find_examples(v, join(field, k), o);
  if (n.is_array())
    for (const auto& v : n) find_examples(v, field + "[]", o);
}

// One field of a file changed alone.
struct Mutation {
  json::json_pointer where;
  std::vector<std::string> path;  // "kernels", "0", "rules", "1", "error"
  std::string field;              // "kernels[].rules[].error"
  json value;                     // the new value
  bool appended = false;          // a token array one element longer
  bool nullness = false;          // an optional field dropped, or given where it was absent
};

// A different value of the same kind: a flipped flag, an id or count + 1, a number × 4 (0, ±inf, NaN: 1), a string
// with a character added. × 4 moves a value by 0.75 relative, beyond every band (checked in EveryRecordedField...).
std::optional<json> other_value(const json& v) {
  if (v.is_boolean()) return json(!v.get<bool>());
  if (v.is_number_unsigned()) return json(v.get<std::uint64_t>() + 1);
  if (v.is_number_integer()) return json(v.get<std::int64_t>() + 1);
  if (const auto x = results::number_from_json(v))  // a number, or "inf", "-inf", "nan" as results write them
    return json(std::isfinite(*x) && *x != 0.0 ? *x * 4 : 1.0);
  if (v.is_string()) return json(v.get<std::string>() + "~");
  return std::nullopt;
}

void mutations(const json& n, Mutation at, const Optionals& o, std::vector<Mutation>& out) {
  if (n.is_null()) {
    const auto ex = o.example.find(at.field);
    at.value = ex == o.example.end() ? json("(no file holds a value here)") : ex->second;
    at.nullness = true;
    out.push_back(at);
    return;
  }
  if (o.nullable.count(at.field)) {
    Mutation dropped = at;
    dropped.value = nullptr;
    dropped.nullness = true;
    out.push_back(dropped);
  }
  if (n.is_object()) {
    for (const auto& [k, v] : n.items()) {
      Mutation below = at;
      below.where.push_back(k);
      below.path.push_back(k);
      below.field = join(at.field, k);
      mutations(v, below, o, out);
    }
  } else if (n.is_array()) {
    for (std::size_t i = 0; i < n.size(); ++i) {
      Mutation below = at;
      below.where.push_back(std::to_string(i));
      below.path.push_back(std::to_string(i));
      below.field = at.field + "[]";
      mutations(n[i], below, o, out);
    }
    if (!n.empty() && n.back().is_primitive()) {  // a sequence of values: one more element
      Mutation longer = at;
      longer.value = n;
      longer.value.push_back(n.back());
      longer.field = at.field + "[]";
      longer.appended = true;
      out.push_back(longer);
    }
  } else if (auto v = other_value(n)) {
    at.value = *v;
    out.push_back(at);
  } else {
    at.value = "(no other value of this kind)";
    out.push_back(at);
  }
}

bool is_index(const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; }

// The change fields golden::check must name for a mutation of the entry `entry` (path[0..1] = "kernels", "<i>").
std::set<std::string> expected_fields(const json& entry, const Mutation& m) {
  if (m.path.size() < 3) return {m.field};  // a field of the file, not of an entry
  const std::vector<std::string> rel(m.path.begin() + 2, m.path.end());
  if (rel.size() == 1 && rel[0] == "key") return {"present"};  // the entry under its old key is gone, a new one came
  if (rel.size() == 3 && rel[0] == "rules") {
    const std::string rule = entry["rules"][std::stoul(rel[1])]["rule"].get<std::string>();
    if (rel[2] == "rule") return {"rule " + rule + ".present", "rule " + m.value.get<std::string>() + ".present"};
    return {"rule " + rule + "." + rel[2]};
  }
  const auto alias = kChangeName.find(rel[0]);
  std::string name = alias == kChangeName.end() ? rel[0] : alias->second;
  for (std::size_t i = 1; i < rel.size(); ++i) name += is_index(rel[i]) ? "[" + rel[i] + "]" : "." + rel[i];
  if (m.appended) name += ".length";
  if (m.nullness) name += ".present";
  return {name};
}

std::string text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::set<std::string> listed(bool deterministic) {
  std::set<std::string> s;
  for (const Ignored& i : kIgnored)
    if (!deterministic || !i.gpu_band_only) s.insert(i.field);
  return s;
}

struct Walk {
  std::size_t changed = 0;                       // mutations compared
  std::map<std::string, std::string> wrong;      // "<file>: <field>" -> the first mutation that went wrong
  std::map<bool, std::set<std::string>> silent;  // band deterministic? -> fields whose change went unreported
  std::map<bool, std::map<std::string, std::string>> silent_example;  // band deterministic? -> field -> its first
  std::map<bool, std::set<std::string>> walked;                       // band deterministic? -> fields changed
  double widest_band = 0.0;
};

// One entry of a file alone, with the file's provenance and band, and the record it was built from.
struct Entry {
  const File* file;
  const char* part;  // "tokens" or "kernels"
  std::size_t index;
  json one;  // a baseline holding this entry only
  std::vector<RunPairRecord> pairs;
  std::vector<KernelCaseRecord> kernels;
  std::string key;
};

Entry entry(const File& f, const char* part, std::size_t i) {
  Entry e{&f, part, i, {{"provenance", f.text["provenance"]}, {"band", f.text["band"]}}, {}, {}, {}};
  e.one["tokens"] = json::array();
  e.one["kernels"] = json::array();
  e.one[part].push_back(f.text[part][i]);
  if (std::string(part) == "tokens")
    e.pairs = {f.pairs[i]};
  else
    e.kernels = {f.kernels[i]};
  e.key = f.text[part][i]["key"].get<std::string>();
  return e;
}

// Changes `m` in the entry's baseline, runs the comparison, and files the outcome.
void judge(const Entry& e, Mutation m, const std::set<std::string>& ignored, Walk& r) {
  const File& f = *e.file;
  const bool det = f.baseline.band.deterministic;
  json changed = e.one;
  changed[m.where] = m.value;
  if (m.path.size() > 2) m.path[1] = std::to_string(e.index);  // named by the entry's index in the file
  ++r.changed;
  r.walked[det].insert(m.field);
  std::string where = f.name + " " + m.path[0];
  for (std::size_t k = 1; k < m.path.size(); ++k)
    where += is_index(m.path[k]) ? "[" + m.path[k] + "]" : "." + m.path[k];
  const std::string what = f.name + ": " + m.field, changed_to = where + " -> " + text(m.value) + ": ";
  std::vector<Change> found;
  try {
    found = check(baseline_from_json(changed, f.name), e.pairs, e.kernels);
  } catch (const BadGoldenFile& err) {
    if (!kRefusedOnRead.count(m.field)) r.wrong.emplace(what, changed_to + "refused when read: " + err.what());
    return;
  }
  if (kRefusedOnRead.count(m.field)) {
    r.wrong.emplace(what, changed_to + "read although listed as refused");
  } else if (found.empty()) {
    r.silent[det].insert(m.field);
    r.silent_example[det].emplace(m.field, where + " -> " + text(m.value));
  } else if (ignored.count(m.field)) {
    r.wrong.emplace(what, changed_to + "listed as ignored, but reported: " + describe(found[0]));
  } else {
    const auto names = expected_fields(e.one[e.part][0], m);
    const std::string new_key = m.path.size() == 3 && m.path[2] == "key" ? text(m.value) : e.key;
    for (const Change& c : found)
      if (!names.count(c.field) || (c.key != e.key && c.key != new_key)) {
        std::string want;
        for (const auto& n : names) want += (want.empty() ? "" : " or ") + n;
        r.wrong.emplace(what, changed_to + "reported '" + describe(c) + "', expected " + want + " of " + e.key);
        return;
      }
  }
}

// Every field of every entry of every file changed alone (provenance and band once per file).
const Walk& walk() {
  static const Walk w = [] {
    Walk r;
    Optionals o;
    for (const File& f : files()) find_nulls(f.text, "", o);
    for (const File& f : files()) find_examples(f.text, "", o);
    for (const File& f : files()) {
      const std::set<std::string> ignored = listed(f.baseline.band.deterministic);
      r.widest_band = std::max(r.widest_band, f.baseline.band.error_rel);
      bool file_fields_done = false;
      for (const char* part : {"tokens", "kernels"})
        for (std::size_t i = 0; i < f.text[part].size(); ++i) {
          const Entry e = entry(f, part, i);
          if (!check(baseline_from_json(e.one, f.name), e.pairs, e.kernels).empty()) {
            r.wrong[f.name + ": " + e.key] = "the entry alone, unchanged, differs from its own record";
            continue;
          }
          std::vector<Mutation> ms;
          const Mutation root;  // the whole file
          mutations(e.one, root, o, ms);
          for (const Mutation& m : ms)
            if (m.path.size() > 2 || !file_fields_done) judge(e, m, ignored, r);
          file_fields_done = true;
        }
    }
    return r;
  }();
  return w;
}

std::string lines(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += "\n  " + x;
  return out.empty() ? "\n  (none)" : out;
}

std::string reasons(bool deterministic) {
  std::string out;
  for (const Ignored& i : kIgnored)
    if (!deterministic || !i.gpu_band_only) out += std::string("\n  ") + i.field + ": " + i.why;
  return out;
}

TEST(GoldenFields, BaselinesAreBuiltFromTheirRecords) {
  ASSERT_FALSE(files().empty()) << "no baseline under " << kBaselines;
  for (const File& f : files()) {
    const json built = to_json(make_baseline(f.baseline.provenance, f.pairs, f.kernels, f.baseline.band));
    const json patch = json::diff(f.text, built);
    EXPECT_TRUE(patch.empty()) << f.name << ": the file is not what its entries' records make (a field pair_of or "
                               << "case_of misses?); first difference: " << (patch.empty() ? "" : patch[0].dump());
  }
}

TEST(GoldenFields, EveryRecordedFieldChangedAloneIsReportedNamingIt) {
  const Walk& w = walk();
  EXPECT_GT(w.changed, 1000u) << "too few fields changed: were the baselines found?";
  EXPECT_LT(w.widest_band, 0.75) << "a band this wide hides the test's × 4 changes";
  for (const auto& [det, fields] : w.silent)
    for (const auto& field : fields)
      if (!listed(det).count(field))
        ADD_FAILURE() << field << " (band deterministic=" << det << "): changed alone (e.g. "
                      << w.silent_example.at(det).at(field)
                      << "), `kvconf golden check` reports nothing; compare it in "
                      << "golden/src/compare.cpp, or list it in kIgnored with the reason";
  for (const auto& [what, how] : w.wrong) ADD_FAILURE() << what << ": " << how;
}

TEST(GoldenFields, IgnoredFieldsAreExactlyTheListed) {
  const Walk& w = walk();
  for (const bool det : {true, false}) {
    ASSERT_TRUE(w.walked.count(det)) << "no committed baseline with band deterministic=" << det << " to check";
    const auto silent = w.silent.count(det) ? w.silent.at(det) : std::set<std::string>{};
    EXPECT_EQ(silent, listed(det)) << "band deterministic=" << det
                                   << ": fields the comparison ignores:" << lines(silent)
                                   << "\nlisted as ignored (kIgnored):" << reasons(det);
  }
  for (const auto& f : kRefusedOnRead) EXPECT_TRUE(w.walked.at(true).count(f)) << f << " is in no baseline";
}

}  // namespace
}  // namespace kvconf::golden
