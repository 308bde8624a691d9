// GSM8K reading, answer extraction, seeded sampling and the few-shot prompt (gsm8k.hpp, docs/PROTOCOL.md).
#include "kvconf/protocol/gsm8k.hpp"

#include <cctype>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "kvconf/protocol/bad_input.hpp"

namespace kvconf::protocol {
namespace {

bool digit(char c) { return c >= '0' && c <= '9'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014; the constants of
// Vigna's public-domain splitmix64.c): one 64-bit output per call.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) by rejection: outputs at or above the largest multiple of n are redrawn (no modulo bias).
  std::uint64_t below(std::uint64_t n) {
    const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
    const std::uint64_t limit = max - max % n;
    for (;;) {
      const std::uint64_t x = next();
      if (x < limit) return x % n;
    }
  }
};

}  // namespace

std::optional<std::string> normalize_number(std::string_view s) {
  s = trim(s);
  bool negative = false;
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  if (!s.empty() && s.front() == '$') s.remove_prefix(1);
  std::string digits;
  for (char c : s)
    if (c != ',') digits += c;
  const std::size_t dot = digits.find('.');
  std::string int_part = digits.substr(0, dot);
  std::string frac = dot == std::string::npos ? "" : digits.substr(dot + 1);
  if (int_part.empty() && frac.empty()) return std::nullopt;
  for (char c : int_part)
    if (!digit(c)) return std::nullopt;
  for (char c : frac)
    if (!digit(c)) return std::nullopt;
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  std::size_t lead = 0;
  while (lead + 1 < int_part.size() && int_part[lead] == '0') ++lead;
  int_part = int_part.substr(lead);
  if (int_part.empty()) int_part = "0";
  std::string out = int_part + (frac.empty() ? "" : "." + frac);
  if (negative && out != "0") out = "-" + out;
  return out;
}

std::optional<std::string> gsm8k_gold(std::string_view answer) {
  const std::size_t at = answer.rfind("####");
  if (at == std::string_view::npos) return std::nullopt;
  return normalize_number(answer.substr(at + 4));
}

std::optional<std::string> last_number(std::string_view t) {
  std::optional<std::string> last;
  std::size_t i = 0;
  while (i < t.size()) {
    if (!digit(t[i])) {
      ++i;
      continue;
    }
    std::size_t start = i;
    // A '-' right before the digits is a sign unless it follows a word or number character ("5-3" is a subtraction).
    if (start > 0 && t[start - 1] == '-' && (start == 1 || !std::isalnum(static_cast<unsigned char>(t[start - 2]))))
      --start;
    std::size_t j = i;
    while (j < t.size() && digit(t[j])) ++j;
    // Thousands groups: ",ddd" not followed by another digit.
    while (j + 3 < t.size() && t[j] == ',' && digit(t[j + 1]) && digit(t[j + 2]) && digit(t[j + 3]) &&
           (j + 4 >= t.size() || !digit(t[j + 4])))
      j += 4;
    if (j + 1 < t.size() && t[j] == '.' && digit(t[j + 1])) {
      ++j;
      while (j < t.size() && digit(t[j])) ++j;
    }
    last = normalize_number(t.substr(start, j - start));
    i = j;
  }
  return last;
}

std::string cut_at_stop(std::string_view text) {
  const std::size_t at = text.find("Question:");
  return std::string(at == std::string_view::npos ? text : text.substr(0, at));
}

std::vector<Gsm8kProblem> read_gsm8k(const std::filesystem::path& jsonl) {
  std::ifstream in(jsonl, std::ios::binary);
  if (!in)
    throw BadInput(jsonl.string() + ": cannot open the GSM8K file (expected a jsonl of {\"question\", \"answer\"})");
  std::vector<Gsm8kProblem> out;
  std::string line;
  for (std::size_t index = 0; std::getline(in, line); ++index) {
    if (trim(line).empty()) continue;
    const std::string where = jsonl.string() + ":" + std::to_string(index + 1) + ": ";
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {  // also out_of_range: a number beyond double
      throw BadInput(where + "not a JSON object (" + e.what() + ")");
    }
    if (!j.is_object()) throw BadInput(where + "expected a JSON object with fields 'question' and 'answer'");
    for (const char* field : {"question", "answer"})
      if (!j.contains(field) || !j[field].is_string())
        throw BadInput(where + "field '" + field + "': missing or not a string");
    Gsm8kProblem p;
    p.index = index;
    p.question = j["question"].get<std::string>();
    p.answer = j["answer"].get<std::string>();
    if (p.answer.find("####") == std::string::npos)
      throw BadInput(where + "field 'answer': no '####' before the gold answer");
    const std::optional<std::string> gold = gsm8k_gold(p.answer);
    if (!gold)
      throw BadInput(where + "field 'answer': the text after '####' is not a number ('" +
                     std::string(trim(std::string_view(p.answer).substr(p.answer.rfind("####") + 4))) + "')");
    p.gold = *gold;
    out.push_back(std::move(p));
  }
  if (out.empty()) throw BadInput(jsonl.string() + ": no GSM8K problems (an empty file)");
  return out;
}

std::vector<std::size_t> sample_indices(std::size_t N, std::size_t n, std::uint64_t seed) {
  if (n > N)
    throw BadInput("cannot sample " + std::to_string(n) + " problems without replacement from " + std::to_string(N));
  std::vector<std::size_t> a(N);
  for (std::size_t i = 0; i < N; ++i) a[i] = i;
  SplitMix64 g{seed};
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t j = i + static_cast<std::size_t>(g.below(N - i));
    std::swap(a[i], a[j]);
  }
  a.resize(n);
  return a;
}

std::vector<std::size_t> exemplar_indices(std::size_t N, const std::vector<std::size_t>& sampled, std::size_t shots) {
  const std::set<std::size_t> in_sample(sampled.begin(), sampled.end());
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < N && out.size() < shots; ++i)
    if (!in_sample.count(i)) out.push_back(i);
  if (out.size() < shots)
    throw BadInput("--shots " + std::to_string(shots) + " needs " + std::to_string(shots) +
                   " problems outside the sample, but only " + std::to_string(out.size()) + " of " + std::to_string(N) +
                   " are left (lower --n or --shots)");
  return out;
}

std::string strip_calculator(std::string_view answer) {
  std::string out;
  std::size_t i = 0;
  while (i < answer.size()) {
    const std::size_t open = answer.find("<<", i);
    if (open == std::string_view::npos) break;
    const std::size_t close = answer.find(">>", open + 2);
    if (close == std::string_view::npos) break;
    out += answer.substr(i, open - i);
    i = close + 2;
  }
  out += answer.substr(i);
  return out;
}

std::string gsm8k_prompt(const std::vector<Gsm8kProblem>& all, const std::vector<std::size_t>& exemplars,
                         const Gsm8kProblem& p) {
  std::string s;
  for (std::size_t e : exemplars)
    s += "Question: " + all.at(e).question + "\nAnswer: " + strip_calculator(all.at(e).answer) + "\n\n";
  s += "Question: " + p.question + "\nAnswer:";
  return s;
}

}  // namespace kvconf::protocol
