# `kvconf check` end to end on synthetic kvconf.trace/1 files (make_traces.py): a good pair passes (exit 0) and writes
# the report; a pair whose prefill logits differ by one ulp fails prefill_logits_bitwise (exit 1); each bad trace
# exits 2 with one line naming the file and the field; --dir pairs a folder and refuses a trace without a partner.
# Run: cmake -DKVCONF=<kvconf> -DPYTHON=<python> -DSCRIPT=<make_traces.py> -DOUT=<dir> -P cli_check_test.cmake
include(${CMAKE_CURRENT_LIST_DIR}/cli_support.cmake)

file(REMOVE_RECURSE "${OUT}")
execute_process(COMMAND "${PYTHON}" "${SCRIPT}" "${OUT}/t" RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "make_traces.py failed: ${err}")
endif()
set(T "${OUT}/t")

kv(0 check --on ${T}/good.on.safetensors --off ${T}/good.off.safetensors --out ${OUT}/good)
foreach(f pairs.jsonl report.html report.md report.json junit.xml manifest.json)
  if(NOT EXISTS "${OUT}/good/${f}")
    message(FATAL_ERROR "kvconf check wrote no ${f}")
  endif()
endforeach()
file(READ "${OUT}/good/pairs.jsonl" pairs)
if(NOT pairs MATCHES "\"profile\":\"fp16-synthetic-eager\"" OR NOT pairs MATCHES "prefill_logits_bitwise")
  message(FATAL_ERROR "pairs.jsonl lacks the trace profile or the prefill rule:\n${pairs}")
endif()
# --resume keeps the pair; a second run without it is refused (the store exists).
kv(0 check --on ${T}/good.on.safetensors --off ${T}/good.off.safetensors --out ${OUT}/good --resume)
if(NOT last_out MATCHES "0 checked now, 1 resumed")
  message(FATAL_ERROR "--resume redid the pair:\n${last_out}")
endif()
kvconf_expect_bad("existing results" "pairs.jsonl exists" check --on ${T}/good.on.safetensors
                  --off ${T}/good.off.safetensors --out ${OUT}/good)

kv(1 check --on ${T}/prefill.on.safetensors --off ${T}/prefill.off.safetensors --out ${OUT}/prefill)
if(NOT last_out MATCHES "FAIL .*prefill_logits_bitwise")
  message(FATAL_ERROR "a one-ulp prefill difference did not fail prefill_logits_bitwise:\n${last_out}")
endif()

# 1.2's engine report: the honest pair passes scenario_path; a cache-ON side whose cache held one row too few after
# call 2, or whose calls say it recomputed, fails it naming the call and the field.
# check_report(STATUS ON_TRACE NAME PATTERN WHAT): kvconf check of ON_TRACE against the 1.2 cache-OFF trace exits
# STATUS and its pairs.jsonl matches PATTERN (WHAT names the failure otherwise).
function(check_report status on name pattern what)
  kv(${status} check --on ${T}/${on}.safetensors --off ${T}/report.off.safetensors --out ${OUT}/${name})
  file(READ "${OUT}/${name}/pairs.jsonl" pairs)
  if(NOT pairs MATCHES "${pattern}")
    message(FATAL_ERROR "${what}:\n${pairs}")
  endif()
endfunction()
check_report(0 report.on report "calls reported by make_traces.py\",[^}]*\"pass\":true,\"rule\":\"scenario_path\""
             "the honest 1.2 pair did not pass scenario_path")
check_report(1 growth.on growth "call 2: cache_after\\[2\\] 5 rows, but a call of 1 tokens over 5 cached rows leaves 6"
             "a cache that did not grow did not fail scenario_path naming cache_after[2]")
check_report(1 recompute.on recompute
             "call 1 \\(step 1\\): calls\\[1\\] fed 5 \\(expected 1\\), calls\\[1\\] cached 0 \\(expected 4\\)"
             "a cache-ON side that recomputed did not fail scenario_path naming calls[1]")

foreach(case "wrong_shape:field 'logits': shape"
             "nan_logits:field 'logits': non-finite"
             "token_out_of_vocab:field 'generated_ids.5.': token id 40 outside"
             "other_prompt:field 'prompt_ids': differs"
             "both_on:field 'path': cache_on"
             "no_metadata:field '__metadata__.kvconf.trace': missing"
             "format_2:field 'format': 'kvconf.trace/2'"
             "draws_outside:field 'draws.5.'"
             "truncated:truncated.safetensors: truncated"
             "kv_in_off:field 'k_rows': present in a cache_off trace"
             "report_in_11:field 'cache_after': needs format 'kvconf.trace/1.2'"
             "report_missing:field 'calls_reported_by': missing"
             "report_short:field 'cache_after': expected 6 row counts"
             "vllm_no_calls:field 'calls': missing: a vLLM trace carries vLLM's report of its path"
             "vllm_no_report:field 'engine_report': missing"
             "vllm_bad_count:field 'engine_report.num_cached_tokens': expected an integer >= 0, got -1"
             "kv_format_unknown:field 'scenario.kv_format': 'q5_k', expected fp8_e4m3, fp8_e5m2, int8_token, int4_token, q8_0 or q4_0"
             "kv_format_missing:field 'scenario.kv_format': required for kv_dtype")
  string(FIND "${case}" ":" colon)
  string(SUBSTRING "${case}" 0 ${colon} name)
  math(EXPR start "${colon} + 1")
  string(SUBSTRING "${case}" ${start} -1 pattern)
  kvconf_expect_bad("${name}" "${name}.safetensors.*${pattern}" check --on ${T}/good.on.safetensors
                    --off ${T}/${name}.safetensors --out ${OUT}/bad-${name})
endforeach()
kvconf_expect_bad("neither --on nor --dir" "--on and --off are both required" check --out ${OUT}/none)

# A folder: the good pair and the prefill pair check together; a lone trace is refused.
file(MAKE_DIRECTORY ${OUT}/dir)
file(COPY ${T}/good.on.safetensors ${T}/good.off.safetensors DESTINATION ${OUT}/dir)
kv(0 check --dir ${OUT}/dir --out ${OUT}/dir-out)
file(COPY ${T}/both_on.safetensors DESTINATION ${OUT}/dir)
kvconf_expect_bad("second cache_on trace" "a second cache_on trace" check --dir ${OUT}/dir --out ${OUT}/dir-out2)
file(REMOVE ${OUT}/dir/both_on.safetensors ${OUT}/dir/good.off.safetensors)
kvconf_expect_bad("lone trace" "no cache_off trace" check --dir ${OUT}/dir --out ${OUT}/dir-out3)
