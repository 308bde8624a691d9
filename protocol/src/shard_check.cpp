// check_shard_coverage (shard_check.hpp): every planned pair of each `kvconf model` run in exactly one --in folder.
#include "kvconf/protocol/shard_check.hpp"

#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "kvconf/results/records.hpp"
#include "kvconf/protocol/bad_input.hpp"
#include "kvconf/protocol/protocol_plan.hpp"
#include "kvconf/protocol/result_store.hpp"

namespace kvconf::protocol {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Folder {
  fs::path dir, manifest;
  json options;  // the manifest's options without "shard"
  Shard shard;
  std::optional<std::vector<std::string>> prompt_ids;  // absent in manifests of kvconf before the check
  std::vector<std::string> keys;                       // pairs.jsonl's record keys, file order
};

template <class T>
T field(const json& o, const char* name, const fs::path& manifest, const char* expected) {
  try {
    return o.at(name).get<T>();
  } catch (const json::exception&) {
    throw BadInput(manifest.string() + ": field 'options." + name + "': expected " + expected);
  }
}

std::optional<Folder> read_folder(const fs::path& dir) {
  Folder f{dir, dir / "manifest.json", {}, {}, {}, {}};
  std::error_code ec;
  if (!fs::is_regular_file(f.manifest, ec)) return std::nullopt;
  json m;
  try {
    std::ifstream in(f.manifest);
    m = json::parse(in);
  } catch (const json::exception& e) {
    throw BadInput(f.manifest.string() + ": not JSON (" + e.what() + ")");
  }
  if (!m.is_object() || m.value("command", std::string()) != "model") return std::nullopt;  // kernels, run, ...
  if (!m.contains("options") || !m["options"].is_object())
    throw BadInput(f.manifest.string() + ": field 'options': expected an object (a kvconf model manifest)");
  f.options = m["options"];
  try {
    f.shard = protocol::parse_shard(field<std::string>(f.options, "shard", f.manifest, "\"I/N\""));
  } catch (const BadInput& e) {
    throw BadInput(f.manifest.string() + ": field 'options.shard': " + e.what());
  }
  f.options.erase("shard");
  if (m.contains("prompt_ids")) {
    try {
      f.prompt_ids = m["prompt_ids"].get<std::vector<std::string>>();
    } catch (const json::exception&) {
      throw BadInput(f.manifest.string() + ": field 'prompt_ids': expected an array of strings");
    }
  }
  if (fs::is_regular_file(dir / "pairs.jsonl", ec))
    for (const json& j : protocol::read_jsonl(dir / "pairs.jsonl")) {
      try {
        f.keys.push_back(results::run_pair_from_json(j).key());
      } catch (const std::exception& e) {
        throw BadInput((dir / "pairs.jsonl").string() + ": " + e.what());
      }
    }
  return f;
}

std::string shard_name(const Folder& f) { return f.dir.string() + " (shard " + f.shard.str() + ")"; }

// One run: the folders of the same options. Returns its planned pairs and how many no folder holds.
std::pair<std::size_t, std::size_t> check_run(const std::vector<const Folder*>& run, bool allow_missing,
                                              std::vector<std::string>& notes) {
  const Folder& first = *run.front();
  const json& o = first.options;
  const auto model = field<std::string>(o, "model", first.manifest, "a string");
  const auto profiles = field<std::vector<std::string>>(o, "profiles", first.manifest, "an array of strings");
  const auto strategies = field<std::vector<std::string>>(o, "strategies", first.manifest, "an array of strings");
  const auto seeds = field<std::vector<std::uint64_t>>(o, "seeds", first.manifest, "an array of integers");
  const auto n = field<std::size_t>(o, "n", first.manifest, "an integer");
  // kvconf model --scenario: absent in the manifests of the protocol's own pairs.
  const auto scenarios = o.contains("scenarios")
                             ? field<std::vector<std::string>>(o, "scenarios", first.manifest, "an array of strings")
                             : std::vector<std::string>{"cache"};
  for (const Folder* f : run)
    if (f->shard.count != first.shard.count)
      throw BadInput(shard_name(first) + " and " + shard_name(*f) + " are shards of the same run of " + model +
                     " split into different numbers of shards: merge the N folders of one --shard I/N split");

  // Who holds which pair: a key twice (in one folder or two) is a duplicate.
  std::map<std::string, const Folder*> holder;
  for (const Folder* f : run)
    for (const std::string& k : f->keys)
      if (auto [it, fresh] = holder.emplace(k, f); !fresh)
        throw BadInput("pair '" + k + "' is " +
                       (it->second == f ? "twice in " + shard_name(*f)
                                        : "in both " + shard_name(*it->second) + " and " + shard_name(*f)) +
                       ": every planned pair must be merged exactly once (leave one of the folders out)");

  const std::size_t planned_n = profiles.size() * strategies.size() * seeds.size() * n * scenarios.size();
  std::optional<std::vector<std::string>> ids;
  for (const Folder* f : run)
    if (f->prompt_ids) {
      if (ids && *ids != *f->prompt_ids)
        throw BadInput(first.manifest.string() + " and " + f->manifest.string() +
                       ": field 'prompt_ids' differs between shards of the same run");
      ids = f->prompt_ids;
    }
  std::size_t missing = 0;
  std::string first_missing;
  // Without the manifests' prompt ids (kvconf model writes none so far) the prompts are those the records name; when
  // they are all n of them the plan is known but for its order (so no shard can be named); fewer is counted only.
  const bool ordered = ids.has_value();
  if (!ids) {
    std::set<std::string> seen;
    for (const auto& [key, f] : holder) seen.insert(key.substr(key.rfind('|') + 1));
    if (seen.size() < n) {
      missing = planned_n - holder.size();
      first_missing = std::to_string(missing) + " of the " + std::to_string(planned_n) +
                      " planned pairs of the run of " + model + " are missing: no folder holds a pair of " +
                      std::to_string(n - seen.size()) + " of its n=" + std::to_string(n) + " prompts (" +
                      std::to_string(run.size()) + " of " + std::to_string(first.shard.count) + " shards given)";
    }
    ids.emplace(seen.begin(), seen.end());
  }
  if (!missing) {
    const auto plan = protocol::plan_work(profiles, strategies, seeds, ids->size(), Shard{}, scenarios);
    std::set<std::string> planned;
    std::map<std::size_t, const Folder*> by_shard;
    for (const Folder* f : run) by_shard.emplace(f->shard.index, f);
    for (const protocol::WorkItem& w : plan) {
      results::RunPairRecord r;
      r.model = model, r.profile = w.record_profile(), r.strategy = w.strategy, r.seed = w.seed;
      r.prompt_id = (*ids)[w.prompt];
      const std::string key = r.key();
      planned.insert(key);
      const auto it = holder.find(key);
      const std::size_t owner = w.index % first.shard.count;
      if (it != holder.end()) {
        if (ordered && it->second->shard.index != owner)
          throw BadInput("pair '" + key + "' is in " + shard_name(*it->second) + " but plan item " +
                         std::to_string(w.index) + " belongs to shard " + std::to_string(owner) + "/" +
                         std::to_string(first.shard.count));
        continue;
      }
      if (missing++ == 0 && !ordered) {
        std::string folders;
        for (const Folder* f : run) {
          if (!folders.empty()) folders += ", ";
          folders += shard_name(*f);
        }
        first_missing = "pair '" + key + "' is missing: none of " + folders + " holds it (an unfinished shard: " +
                        "finish it with kvconf model ... --resume; or a shard not given)";
      } else if (missing == 1) {
        const auto f = by_shard.find(owner);
        first_missing = "pair '" + key + "' (plan item " + std::to_string(w.index) + ", shard " +
                        std::to_string(owner) + "/" + std::to_string(first.shard.count) + ") is missing: " +
                        (f == by_shard.end() ? "no --in folder is shard " + std::to_string(owner) + "/" +
                                                   std::to_string(first.shard.count)
                                             : f->second->dir.string() +
                                                   " does not hold it (an unfinished shard: "
                                                   "finish it with kvconf model ... --resume)");
      }
    }
    for (const auto& [key, f] : holder)
      if (!planned.count(key))
        throw BadInput("pair '" + key + "' in " + shard_name(*f) + " is not in the plan of " + f->manifest.string());
    if (missing > 1)
      first_missing += " (" + std::to_string(missing) + " of the run's " + std::to_string(plan.size()) +
                       " planned pairs are missing)";
  }
  if (missing && !allow_missing) throw BadInput(first_missing + "; pass --partial to report the pairs there are");
  std::ostringstream line;
  line << model << ": " << run.size() << " of " << first.shard.count << " shards, " << planned_n - missing << " of "
       << planned_n << " planned pairs, each once";
  if (missing) line << "; missing: " << first_missing;
  notes.push_back(line.str());
  return {planned_n, missing};
}

}  // namespace

ShardCoverage check_shard_coverage(const std::vector<fs::path>& dirs, bool allow_missing) {
  std::vector<Folder> folders;
  for (const fs::path& d : dirs)
    if (auto f = read_folder(d)) folders.push_back(std::move(*f));
  std::map<std::string, std::vector<const Folder*>> runs;  // by the options but the shard
  std::vector<std::string> order;
  for (const Folder& f : folders) {
    auto& run = runs[f.options.dump()];
    if (run.empty()) order.push_back(f.options.dump());
    run.push_back(&f);
  }
  ShardCoverage c;
  for (const std::string& k : order) {
    const auto [planned, missing] = check_run(runs[k], allow_missing, c.notes);
    ++c.runs;
    c.planned += planned;
    c.missing += missing;
  }
  return c;
}

}  // namespace kvconf::protocol
