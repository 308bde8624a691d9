// Golden baseline files: JSON with provenance and band, written atomically; reading names the file and the field of
// anything malformed and tells the command that rewrites it.
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "kvconf/results/records.hpp"
#include "kvconf/engine/atomic_file.hpp"
#include "kvconf/golden/golden.hpp"

namespace kvconf::golden {

using nlohmann::json;

namespace {

// JSON has no infinities: a bitwise rule's bound or a blown-up error is written as a string (records.hpp).
json num(double x) { return results::json_number(x); }

struct Reader {
  const std::string& file;

  [[noreturn]] void bad(const std::string& field, const std::string& expected) const {
    throw BadGoldenFile("golden file " + file + ": field '" + field + "': expected " + expected +
                        "; regenerate the baselines with `" + kUpdateCommand + "`");
  }
  const json& at(const json& j, const std::string& where, const char* name) const {
    const std::string f = where.empty() ? name : where + "." + name;
    if (!j.is_object()) bad(where.empty() ? "(top level)" : where, "an object");
    auto it = j.find(name);
    if (it == j.end()) bad(f, "to be present");
    return *it;
  }
  std::string str(const json& j, const std::string& where, const char* name) const {
    const json& v = at(j, where, name);
    if (!v.is_string()) bad(where.empty() ? name : where + "." + name, "a string");
    return v.get<std::string>();
  }
  bool boolean(const json& j, const std::string& where, const char* name) const {
    const json& v = at(j, where, name);
    if (!v.is_boolean()) bad(where + "." + name, "true or false");
    return v.get<bool>();
  }
  std::uint64_t uint(const json& j, const std::string& where, const char* name) const {
    const json& v = at(j, where, name);
    if (!v.is_number_unsigned()) bad(where.empty() ? name : where + "." + name, "a non-negative integer");
    return v.get<std::uint64_t>();
  }
  double number(const json& j, const std::string& where, const char* name) const {
    if (const auto x = results::number_from_json(at(j, where, name))) return *x;
    bad(where + "." + name, "a number (or \"inf\", \"-inf\", \"nan\")");
  }
  std::vector<int> ints(const json& j, const std::string& where, const char* name) const {
    const json& v = at(j, where, name);
    const std::string f = where + "." + name;
    if (!v.is_array()) bad(f, "an array of token ids");
    std::vector<int> out;
    for (const json& x : v) {
      if (!x.is_number_integer()) bad(f, "an array of token ids (integers)");
      out.push_back(x.get<int>());
    }
    return out;
  }
  const json& array(const json& j, const char* name) const {
    const json& v = at(j, "", name);
    if (!v.is_array()) bad(name, "an array");
    return v;
  }
};

}  // namespace

json to_json(const Baseline& b) {
  const Provenance& p = b.provenance;
  json j;
  j["provenance"] = {{"schema", p.schema},   {"kvconf_version", p.kvconf_version},
                     {"profile", p.profile}, {"seed", p.seed},
                     {"date", p.date},       {"command", p.command}};
  j["band"] = {{"error_rel", b.band.error_rel}, {"deterministic", b.band.deterministic}};
  j["tokens"] = json::array();
  for (const TokenRun& t : b.tokens)
    j["tokens"].push_back({{"key", t.key},
                           {"free_on", t.free_on},
                           {"free_off", t.free_off},
                           {"teacher_on", t.teacher_on},
                           {"teacher_off", t.teacher_off}});
  j["kernels"] = json::array();
  for (const KernelStat& k : b.kernels) {
    json rules = json::array();
    for (const RuleStat& r : k.rules)
      rules.push_back(
          {{"rule", r.rule}, {"pass", r.pass}, {"error", num(r.error)}, {"bound", num(r.bound)}, {"seed", r.seed}});
    json e = {{"key", k.key}, {"skipped", k.skipped}, {"rules", rules}};
    e["on_off"] = k.on_off_differing
                      ? json{{"differing", *k.on_off_differing}, {"max_ulp", num(k.on_off_max_ulp.value_or(0.0))}}
                      : json(nullptr);
    j["kernels"].push_back(std::move(e));
  }
  return j;
}

Baseline baseline_from_json(const json& j, const std::string& file) {
  const Reader r{file};
  Baseline b;
  const json& p = r.at(j, "", "provenance");
  b.provenance.schema = r.str(p, "provenance", "schema");
  if (b.provenance.schema != kSchema)
    r.bad("provenance.schema",
          std::string("\"") + kSchema + "\" (this build's version), found \"" + b.provenance.schema + "\"");
  b.provenance.kvconf_version = r.str(p, "provenance", "kvconf_version");
  b.provenance.profile = r.str(p, "provenance", "profile");
  b.provenance.seed = r.uint(p, "provenance", "seed");
  b.provenance.date = r.str(p, "provenance", "date");
  b.provenance.command = r.str(p, "provenance", "command");
  const json& band = r.at(j, "", "band");
  b.band.error_rel = r.number(band, "band", "error_rel");
  if (!(b.band.error_rel >= 0.0)) r.bad("band.error_rel", "a number >= 0");
  b.band.deterministic = r.boolean(band, "band", "deterministic");

  const json& tokens = r.array(j, "tokens");
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::string w = "tokens[" + std::to_string(i) + "]";
    TokenRun t;
    t.key = r.str(tokens[i], w, "key");
    t.free_on = r.ints(tokens[i], w, "free_on");
    t.free_off = r.ints(tokens[i], w, "free_off");
    t.teacher_on = r.ints(tokens[i], w, "teacher_on");
    t.teacher_off = r.ints(tokens[i], w, "teacher_off");
    b.tokens.push_back(std::move(t));
  }
  const json& kernels = r.array(j, "kernels");
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const std::string w = "kernels[" + std::to_string(i) + "]";
    KernelStat k;
    k.key = r.str(kernels[i], w, "key");
    k.skipped = r.str(kernels[i], w, "skipped");
    const json& rules = r.at(kernels[i], w, "rules");
    if (!rules.is_array()) r.bad(w + ".rules", "an array");
    for (std::size_t n = 0; n < rules.size(); ++n) {
      const std::string wr = w + ".rules[" + std::to_string(n) + "]";
      RuleStat s;
      s.rule = r.str(rules[n], wr, "rule");
      s.pass = r.boolean(rules[n], wr, "pass");
      s.error = r.number(rules[n], wr, "error");
      s.bound = r.number(rules[n], wr, "bound");
      s.seed = r.uint(rules[n], wr, "seed");
      k.rules.push_back(std::move(s));
    }
    const json& oo = r.at(kernels[i], w, "on_off");
    if (!oo.is_null()) {
      k.on_off_differing = r.uint(oo, w + ".on_off", "differing");
      k.on_off_max_ulp = r.number(oo, w + ".on_off", "max_ulp");
    }
    b.kernels.push_back(std::move(k));
  }
  return b;
}

Baseline read_baseline(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw BadGoldenFile("golden file " + file.string() + ": cannot be read (missing?); create the baselines with `" +
                        kUpdateCommand + "`");
  std::ostringstream ss;
  ss << in.rdbuf();
  json j;
  try {
    j = json::parse(ss.str());
  } catch (const json::exception& e) {  // also out_of_range: a number beyond double
    throw BadGoldenFile("golden file " + file.string() + ": not valid JSON (" + e.what() +
                        "); regenerate the baselines with `" + kUpdateCommand + "`");
  }
  return baseline_from_json(j, file.string());
}

void write_baseline(const std::filesystem::path& file, const Baseline& b) {
  engine::write_file_atomic(file, to_json(b).dump(1) + "\n");
}

}  // namespace kvconf::golden
