// JSON form of the run-pair and kernel-case records (records.hpp). Non-finite numbers (a bitwise rule's −inf headroom)
// are written as the strings "inf", "-inf", "nan", since JSON has no such numbers.
#include "kvconf/results/records.hpp"

#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace kvconf::results {

using nlohmann::json;

namespace {

json num(double x) { return json_number(x); }

[[noreturn]] void bad(const std::string& field, const std::string& expected) {
  throw std::runtime_error("field '" + field + "': expected " + expected);
}

const json& at(const json& j, const std::string& prefix, const char* name) {
  if (!j.is_object()) bad(prefix.empty() ? std::string("(record)") : prefix, "an object");
  auto it = j.find(name);
  if (it == j.end()) bad(prefix.empty() ? name : prefix + "." + name, "to be present");
  return *it;
}

std::string path(const std::string& prefix, const char* name) { return prefix.empty() ? name : prefix + "." + name; }

double get_num(const json& j, const std::string& prefix, const char* name) {
  if (const auto x = number_from_json(at(j, prefix, name))) return *x;
  bad(path(prefix, name), "a number (or \"inf\", \"-inf\", \"nan\")");
}

std::string get_str(const json& j, const std::string& prefix, const char* name) {
  const json& v = at(j, prefix, name);
  if (!v.is_string()) bad(path(prefix, name), "a string");
  return v.get<std::string>();
}

bool get_bool(const json& j, const std::string& prefix, const char* name) {
  const json& v = at(j, prefix, name);
  if (!v.is_boolean()) bad(path(prefix, name), "true or false");
  return v.get<bool>();
}

std::uint64_t get_uint(const json& j, const std::string& prefix, const char* name) {
  const json& v = at(j, prefix, name);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
    bad(path(prefix, name), "a non-negative integer");
  return v.get<std::uint64_t>();
}

std::optional<std::string> get_opt_str(const json& j, const std::string& prefix, const char* name) {
  const json& v = at(j, prefix, name);
  if (v.is_null()) return std::nullopt;
  if (!v.is_string()) bad(path(prefix, name), "a string or null");
  return v.get<std::string>();
}

std::vector<double> get_nums(const json& j, const std::string& prefix, const char* name) {
  const json& v = at(j, prefix, name);
  if (!v.is_array()) bad(path(prefix, name), "an array of numbers");
  std::vector<double> out;
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    json wrap = {{"x", v[i]}};
    out.push_back(get_num(wrap, path(prefix, name) + "[" + std::to_string(i) + "]", "x"));
  }
  return out;
}

std::vector<int> get_ints(const json& j, const std::string& prefix, const char* name) {
  const json& v = at(j, prefix, name);
  if (!v.is_array()) bad(path(prefix, name), "an array of integers");
  std::vector<int> out;
  out.reserve(v.size());
  for (const auto& x : v) {
    if (!x.is_number_integer()) bad(path(prefix, name), "an array of integers");
    out.push_back(x.get<int>());
  }
  return out;
}

json nums(const std::vector<double>& v) {
  json a = json::array();
  for (double x : v) a.push_back(num(x));
  return a;
}

void expect_schema(const json& j, const char* schema) {
  const std::string s = get_str(j, "", "schema");
  if (s != schema) bad("schema", std::string("\"") + schema + "\" (this build's version), got \"" + s + "\"");
}

RegimeRecord regime_from_json(const json& j, const std::string& prefix) {
  RegimeRecord r;
  r.tokens_on = get_ints(j, prefix, "tokens_on");
  r.tokens_off = get_ints(j, prefix, "tokens_off");
  const json& f = at(j, prefix, "flip");
  if (!f.is_null()) r.flip = static_cast<std::size_t>(get_uint(j, prefix, "flip"));
  r.kl = get_nums(j, prefix, "kl");
  r.js = get_nums(j, prefix, "js");
  r.margin_on = get_nums(j, prefix, "margin_on");
  r.margin_off = get_nums(j, prefix, "margin_off");
  r.max_abs_logit_diff = get_nums(j, prefix, "max_abs_logit_diff");
  const std::size_t n = r.kl.size();
  for (auto* v : {&r.js, &r.margin_on, &r.margin_off, &r.max_abs_logit_diff})
    if (v->size() != n) bad(prefix + ".*", "per-step arrays of one length (kl has " + std::to_string(n) + ")");
  return r;
}

CheckResults rules_from_json(const json& j, const std::string& prefix, const char* name) {
  const json& v = at(j, prefix, name);
  if (!v.is_array()) bad(path(prefix, name), "an array of rule results");
  CheckResults out;
  for (const auto& x : v) out.push_back(check_result_from_json(x));
  return out;
}

json rules_json(const CheckResults& rs) {
  json a = json::array();
  for (const auto& r : rs) a.push_back(to_json(r));
  return a;
}

}  // namespace

json json_number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

std::optional<double> number_from_json(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  return std::nullopt;
}

double RegimeRecord::mean_kl() const {
  return kl.empty() ? 0.0 : std::accumulate(kl.begin(), kl.end(), 0.0) / static_cast<double>(kl.size());
}

std::string RunPairRecord::key() const {
  return model + "|" + profile + "|" + strategy + "|" + std::to_string(seed) + "|" + prompt_id;
}

std::string KernelCaseRecord::key() const { return kernel + "|" + case_id; }

json to_json(const CheckResult& r) {
  json j = {{"rule", r.rule},
            {"pass", r.pass},
            {"error", num(r.error)},
            {"bound", num(r.bound)},
            {"headroom", num(r.headroom)},
            {"seed", r.seed},
            {"detail", r.detail}};
  // The structured fields, only where the rule has them (older readers see the same record as before).
  if (r.reference_error) j["reference_error"] = num(*r.reference_error);
  if (r.worst_index) j["worst_index"] = *r.worst_index;
  if (r.worst_value) j["worst_value"] = num(*r.worst_value);
  if (r.worst_expected) j["worst_expected"] = num(*r.worst_expected);
  if (!r.paths.empty()) j["paths"] = r.paths;
  return j;
}

CheckResult check_result_from_json(const json& j) {
  CheckResult r;
  r.rule = get_str(j, "rule", "rule");
  r.pass = get_bool(j, "rule", "pass");
  r.error = get_num(j, "rule", "error");
  r.bound = get_num(j, "rule", "bound");
  r.headroom = get_num(j, "rule", "headroom");
  r.seed = get_uint(j, "rule", "seed");
  r.detail = get_str(j, "rule", "detail");
  if (j.contains("reference_error")) r.reference_error = get_num(j, "rule", "reference_error");
  if (j.contains("worst_index")) r.worst_index = get_uint(j, "rule", "worst_index");
  if (j.contains("worst_value")) r.worst_value = get_num(j, "rule", "worst_value");
  if (j.contains("worst_expected")) r.worst_expected = get_num(j, "rule", "worst_expected");
  if (j.contains("paths")) r.paths = get_str(j, "rule", "paths");
  return r;
}

json to_json(const RegimeRecord& r) {
  return {{"tokens_on", r.tokens_on},
          {"tokens_off", r.tokens_off},
          {"flip", r.flip ? json(*r.flip) : json(nullptr)},
          {"kl", nums(r.kl)},
          {"js", nums(r.js)},
          {"margin_on", nums(r.margin_on)},
          {"margin_off", nums(r.margin_off)},
          {"max_abs_logit_diff", nums(r.max_abs_logit_diff)}};
}

json to_json(const RunPairRecord& r) {
  auto opt = [](const std::optional<std::string>& s) { return s ? json(*s) : json(nullptr); };
  return {{"schema", kRunPairSchema},
          {"model", r.model},
          {"profile", r.profile},
          {"strategy", r.strategy},
          {"prompt_id", r.prompt_id},
          {"seed", r.seed},
          {"max_new_tokens", r.max_new_tokens},
          {"prompt_tokens", r.prompt_tokens},
          {"free", to_json(r.free)},
          {"teacher", to_json(r.teacher)},
          {"layer_drift_l2", nums(r.layer_drift_l2)},
          {"layer_cosine", nums(r.layer_cosine)},
          {"rules", rules_json(r.rules)},
          {"gold", opt(r.gold)},
          {"answer_on", opt(r.answer_on)},
          {"answer_off", opt(r.answer_off)},
          {"correct_on", r.correct_on},
          {"correct_off", r.correct_off},
          {"seconds", num(r.seconds)},
          {"fp32_kl_floor", r.fp32_kl_floor ? num(*r.fp32_kl_floor) : json(nullptr)}};
}

RunPairRecord run_pair_from_json(const json& j) {
  expect_schema(j, kRunPairSchema);
  RunPairRecord r;
  r.model = get_str(j, "", "model");
  r.profile = get_str(j, "", "profile");
  r.strategy = get_str(j, "", "strategy");
  r.prompt_id = get_str(j, "", "prompt_id");
  r.seed = get_uint(j, "", "seed");
  r.max_new_tokens = get_uint(j, "", "max_new_tokens");
  r.prompt_tokens = get_uint(j, "", "prompt_tokens");
  r.free = regime_from_json(at(j, "", "free"), "free");
  r.teacher = regime_from_json(at(j, "", "teacher"), "teacher");
  r.layer_drift_l2 = get_nums(j, "", "layer_drift_l2");
  r.layer_cosine = get_nums(j, "", "layer_cosine");
  r.rules = rules_from_json(j, "", "rules");
  r.gold = get_opt_str(j, "", "gold");
  r.answer_on = get_opt_str(j, "", "answer_on");
  r.answer_off = get_opt_str(j, "", "answer_off");
  r.correct_on = get_bool(j, "", "correct_on");
  r.correct_off = get_bool(j, "", "correct_off");
  r.seconds = get_num(j, "", "seconds");
  if (j.contains("fp32_kl_floor") && !j["fp32_kl_floor"].is_null()) r.fp32_kl_floor = get_num(j, "", "fp32_kl_floor");
  return r;
}

json to_json(const KernelCaseRecord& r) {
  json j = {{"schema", kKernelCaseSchema},  {"kernel", r.kernel},   {"kind", r.kind},
            {"case_id", r.case_id},         {"seq_len", r.seq_len}, {"head_dim", r.head_dim},
            {"rules", rules_json(r.rules)}, {"skipped", r.skipped}, {"seconds", num(r.seconds)}};
  if (r.on_off) {
    j["on_off"] = {{"elements", r.on_off->elements},    {"differing", r.on_off->differing},
                   {"max_ulp", num(r.on_off->max_ulp)}, {"max_abs", num(r.on_off->max_abs)},
                   {"max_rel", num(r.on_off->max_rel)}, {"paths", r.on_off->paths}};
  } else {
    j["on_off"] = nullptr;
  }
  return j;
}

KernelCaseRecord kernel_case_from_json(const json& j) {
  expect_schema(j, kKernelCaseSchema);
  KernelCaseRecord r;
  r.kernel = get_str(j, "", "kernel");
  r.kind = get_str(j, "", "kind");
  r.case_id = get_str(j, "", "case_id");
  r.seq_len = get_uint(j, "", "seq_len");
  r.head_dim = get_uint(j, "", "head_dim");
  r.rules = rules_from_json(j, "", "rules");
  r.skipped = get_str(j, "", "skipped");
  r.seconds = get_num(j, "", "seconds");
  const json& o = at(j, "", "on_off");
  if (!o.is_null()) {
    OnOffDiff d;
    d.elements = get_uint(o, "on_off", "elements");
    d.differing = get_uint(o, "on_off", "differing");
    d.max_ulp = get_num(o, "on_off", "max_ulp");
    d.max_abs = get_num(o, "on_off", "max_abs");
    d.max_rel = get_num(o, "on_off", "max_rel");
    d.paths = get_str(o, "on_off", "paths");
    r.on_off = d;
  }
  return r;
}

}  // namespace kvconf::results
