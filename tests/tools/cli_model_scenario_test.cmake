# `kvconf model --scenario` end to end on the llama2-tiny fixture: every scenario under a rounding profile and the
# invariant one (each pair filed under <profile>+<scenario>, its path rule passed, bitwise where demanded, and the
# report and JUnit naming them), two shards merged by `kvconf report` equal to the unsharded run, --resume (nothing
# redone; a different --scenario refused), and bad input (exit 2, one stderr line). Needs -DKVCONF, -DOUT.
cmake_policy(VERSION 3.20)  # IN_LIST
foreach(v KVCONF OUT)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "cli_model_scenario_test.cmake: -D${v}=... is required")
  endif()
endforeach()
include(${CMAKE_CURRENT_LIST_DIR}/cli_support.cmake)
file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}")
set(RUN model --model fixture:llama2-tiny --n 2 --seeds 0 --max-new-tokens 8 --strategies greedy)

# Every scenario: 2 profiles x 2 prompts x 8 scenarios = 32 pairs.
kv(0 ${RUN} --profile fp16-eager,fp16-invariant --scenario all --out "${OUT}/all")
file(STRINGS "${OUT}/all/pairs.jsonl" lines)
list(LENGTH lines n)
if(NOT n EQUAL 32)
  message(FATAL_ERROR "--scenario all: expected 32 records, got ${n}\n${last_out}")
endif()
set(seen "")
foreach(line IN LISTS lines)
  string(JSON profile GET "${line}" profile)
  list(APPEND seen "${profile}")
  string(JSON nrules LENGTH "${line}" rules)
  set(rules "")
  if(nrules GREATER 0)
    math(EXPR last "${nrules} - 1")
    foreach(i RANGE ${last})
      string(JSON rule GET "${line}" rules ${i} rule)
      string(JSON pass GET "${line}" rules ${i} pass)
      if(NOT pass)
        message(FATAL_ERROR "${profile}: rule ${rule} failed on a correct engine:\n${line}")
      endif()
      list(APPEND rules "${rule}")
    endforeach()
  endif()
  if(profile MATCHES "\\+" AND NOT "scenario_path" IN_LIST rules)
    message(FATAL_ERROR "${profile}: no scenario_path rule (the sides' calls unchecked): ${rules}")
  endif()
  # kv_dtype keeps a narrower cache on purpose: judged is its cache (cached_kv), never bitwise nor near ties.
  if(profile MATCHES "\\+kv_dtype$")
    if(NOT "cached_kv" IN_LIST rules OR "scenario_bitwise" IN_LIST rules OR "flip_near_tie" IN_LIST rules)
      message(FATAL_ERROR "${profile}: expected cached_kv and neither bitwise nor near-tie rules: ${rules}")
    endif()
  elseif((profile MATCHES "^fp16-invariant\\+" OR profile MATCHES "\\+restore$") AND NOT "scenario_bitwise" IN_LIST rules)
    message(FATAL_ERROR "${profile}: bitwise is demanded but no scenario_bitwise rule: ${rules}")
  endif()
  if(profile MATCHES "^fp16-eager\\+(prefix|batch|chunked|refill|preempt)$" AND NOT "no_flip" IN_LIST rules AND
     NOT "flip_near_tie" IN_LIST rules)
    message(FATAL_ERROR "${profile}: no near-tie rule: ${rules}")
  endif()
endforeach()
foreach(p fp16-eager fp16-eager+prefix fp16-eager+batch fp16-eager+chunked fp16-eager+refill fp16-eager+restore
          fp16-eager+preempt fp16-eager+kv_dtype fp16-invariant fp16-invariant+batch fp16-invariant+preempt
          fp16-invariant+kv_dtype)
  if(NOT "${p}" IN_LIST seen)
    message(FATAL_ERROR "no record filed under ${p}: ${seen}")
  endif()
endforeach()
file(READ "${OUT}/all/junit.xml" junit)
if(NOT junit MATCHES "fp16-eager\\+batch" OR NOT junit MATCHES "ScenarioRules" OR NOT junit MATCHES "cached_kv 0/2")
  message(FATAL_ERROR "junit.xml names no fp16-eager+batch case, no ScenarioRules verdict or no cached_kv count")
endif()
file(READ "${OUT}/all/manifest.json" manifest)
string(JSON sc LENGTH "${manifest}" options scenarios)
if(NOT sc EQUAL 8)
  message(FATAL_ERROR "manifest.json: options.scenarios has ${sc} entries, expected 8\n${manifest}")
endif()

# --resume: nothing redone; another --scenario list is refused, naming the flag.
kv(0 ${RUN} --profile fp16-eager,fp16-invariant --scenario all --out "${OUT}/all" --resume)
if(NOT last_out MATCHES "32 pairs \\(0 run now, 32 resumed\\)")
  message(FATAL_ERROR "--resume of a finished scenario run redid work:\n${last_out}")
endif()
kvconf_expect_bad("--resume with other scenarios" "--scenario"
                  ${RUN} --profile fp16-eager,fp16-invariant --scenario batch --out "${OUT}/all" --resume)

# Two shards merged equal one run.
set(TWO ${RUN} --profile fp16-eager --scenario prefix,batch)
kv(0 ${TWO} --shard 0/2 --out "${OUT}/s0")
kv(0 ${TWO} --shard 1/2 --out "${OUT}/s1")
kv(0 ${TWO} --out "${OUT}/one")
kvconf_records(merged "${OUT}/s0" "${OUT}/s1")
kvconf_records(single "${OUT}/one")
list(LENGTH single n_single)
if(NOT n_single EQUAL 4 OR NOT merged STREQUAL single)
  message(FATAL_ERROR "the two shards' records differ from the unsharded run's (${n_single} records)")
endif()
kv(0 report --in "${OUT}/s0" "${OUT}/s1" --out "${OUT}/merged")
if(NOT last_out MATCHES "2 of 2 shards, 4 of 4 planned pairs, each once")
  message(FATAL_ERROR "merge of the scenario shards: no coverage line:\n${last_out}")
endif()
kvconf_expect_bad("a scenario shard left out" "pair 'fixture:llama2-tiny\\|fp16-eager\\+(prefix|batch)\\|greedy.*missing"
                  report --in "${OUT}/s0" --out "${OUT}/bad")

# Bad input.
kvconf_expect_bad("an unknown scenario" "--scenario: 'hot' is not a scenario" ${RUN} --scenario hot --out "${OUT}/b1")
kvconf_expect_bad("a scenario twice" "--scenario: 'prefix' is listed twice" ${RUN} --scenario prefix,prefix
                  --out "${OUT}/b2")
kvconf_expect_bad("refill with too few steps" "--scenario refill needs --max-new-tokens >= 3"
                  model --model fixture:llama2-tiny --n 1 --seeds 0 --max-new-tokens 2 --scenario refill
                  --out "${OUT}/b3")
kvconf_expect_bad("--scenario with --experiment" "cannot be combined" ${RUN} --scenario batch
                  --experiment kv_buildup --out "${OUT}/b4")
