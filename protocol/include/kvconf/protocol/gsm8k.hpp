// GSM8K for the paper's protocol (docs/PROTOCOL.md): reading test.jsonl, the gold answer after "####", the model's last
// number, the seeded sample of n problems without replacement, and the few-shot prompt format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvconf::protocol {

struct Gsm8kProblem {
  std::size_t index = 0;  // 0-based line of test.jsonl
  std::string question;
  std::string answer;  // the worked solution, ending "#### N"
  std::string gold;    // N, normalised (normalize_number)
};

// Reads every line of a GSM8K jsonl file ({"question": "...", "answer": "... #### N"} per line). Throws BadInput naming
// the file, the 1-based line and the field ("test.jsonl:12: field 'answer': no '####' before the gold answer").
std::vector<Gsm8kProblem> read_gsm8k(const std::filesystem::path& jsonl);

// A number as written ("1,234", "$18.00", "-3.50", "18.") to a canonical text: thousands separators and a leading '$'
// or '+' removed, trailing fractional zeros and a bare '.' dropped ("18.0" -> "18", "2.50" -> "2.5"), leading zeros of
// the integer part dropped, "-0" -> "0". nullopt when `s` is not a number after that.
std::optional<std::string> normalize_number(std::string_view s);

// The gold answer of a GSM8K solution: the text after the last "####", trimmed and normalised; nullopt when there is
// no "####" or what follows is not a number.
std::optional<std::string> gsm8k_gold(std::string_view answer);

// The last number in generated text (optional '-', digits with optional ",ddd" groups, optional ".digits"),
// normalised; nullopt when the text has no digit.
std::optional<std::string> last_number(std::string_view text);

// Generated text up to the first "Question:" (the few-shot stop sequence: a model that goes on to invent the next
// exemplar is cut there, as lm-evaluation-harness's gsm8k task does with until=["Question:"]).
std::string cut_at_stop(std::string_view text);

// n distinct indices of [0, N), in draw order: a partial Fisher–Yates shuffle driven by SplitMix64 seeded with `seed`
// (draw i swaps slot i with slot i + uniform_below(N − i), uniform by rejection). Deterministic for (N, n, seed), and
// not Python's random.sample: the paper's exact 700 problems are not reproduced. n == N gives a permutation.
// Throws BadInput when n > N.
std::vector<std::size_t> sample_indices(std::size_t N, std::size_t n, std::uint64_t seed);

// The few-shot exemplars: the first `shots` problems in file order that are not in `sampled`. Throws BadInput when
// fewer than `shots` problems are left outside the sample.
std::vector<std::size_t> exemplar_indices(std::size_t N, const std::vector<std::size_t>& sampled, std::size_t shots);

// A solution with the calculator annotations "<<48/2=24>>" removed.
std::string strip_calculator(std::string_view answer);

// The prompt of problem `p` after the exemplars: "Question: Q\nAnswer: A\n\n" per exemplar (A without calculator
// annotations, ending "#### N"), then "Question: Q\nAnswer:".
std::string gsm8k_prompt(const std::vector<Gsm8kProblem>& all, const std::vector<std::size_t>& exemplars,
                         const Gsm8kProblem& p);

}  // namespace kvconf::protocol
