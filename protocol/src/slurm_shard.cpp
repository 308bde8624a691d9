// choose_shard (slurm_shard.hpp): --shard, else the Slurm array task's shard, else 0/1.
#include "kvconf/protocol/slurm_shard.hpp"

#include <charconv>
#include <optional>
#include <string_view>

#include "kvconf/protocol/bad_input.hpp"

namespace kvconf::protocol {
namespace {

constexpr const char* kHint = " (Slurm sets it for the tasks of `sbatch --array=0-15`; or pass --shard I/N)";

// The variable's value as a non-negative decimal integer; nullopt when unset; BadInput when malformed.
std::optional<std::size_t> env_count(const EnvLookup& env, const char* name) {
  const char* raw = env(name);
  if (raw == nullptr) return std::nullopt;
  const std::string_view s(raw);
  std::size_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size())
    throw BadInput(std::string(name) + "='" + std::string(s) + "': expected a non-negative decimal integer" + kHint);
  return v;
}

std::string var(const char* name, std::size_t v) { return std::string(name) + "=" + std::to_string(v); }

}  // namespace

ShardChoice choose_shard(const std::string& flag, bool flag_given, const EnvLookup& env) {
  if (flag_given) return {parse_shard(flag), "--shard"};
  const auto id = env_count(env, "SLURM_ARRAY_TASK_ID");
  const auto count = env_count(env, "SLURM_ARRAY_TASK_COUNT");
  if (!id && !count) return {parse_shard(flag), ""};
  if (!id)
    throw BadInput("SLURM_ARRAY_TASK_COUNT is set but SLURM_ARRAY_TASK_ID is not: expected both" + std::string(kHint));
  if (!count)
    throw BadInput("SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not: expected both" + std::string(kHint));
  const std::size_t min = env_count(env, "SLURM_ARRAY_TASK_MIN").value_or(0);
  const std::size_t step = env_count(env, "SLURM_ARRAY_TASK_STEP").value_or(1);
  if (*count == 0) throw BadInput("SLURM_ARRAY_TASK_COUNT=0: expected at least 1 task" + std::string(kHint));
  if (step == 0) throw BadInput("SLURM_ARRAY_TASK_STEP=0: expected a step of at least 1" + std::string(kHint));
  std::string from = var("SLURM_ARRAY_TASK_ID", *id);
  if (min != 0) from += " - " + var("SLURM_ARRAY_TASK_MIN", min);
  if (step != 1) from = "(" + from + ") / " + var("SLURM_ARRAY_TASK_STEP", step);
  from += " of " + var("SLURM_ARRAY_TASK_COUNT", *count);
  if (*id < min || (*id - min) % step != 0 || (*id - min) / step >= *count)
    throw BadInput(from +
                   ": expected the task's number (ID - MIN) / STEP to be a whole number below the count; "
                   "a job array of consecutive ids (--array=0-N or A-B[:STEP]) gives that, or pass --shard I/N");
  return {Shard{(*id - min) / step, *count}, from};
}

}  // namespace kvconf::protocol
