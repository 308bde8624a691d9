# kvconf-llama-trace's bad input (docs/LLAMA_CPP.md): exit 2 and one stderr line naming the file or option, for a
# missing model, a file llama.cpp cannot load, an unknown cache type or flash-attention value, a context llama.cpp
# refuses (a quantised V cache without flash attention), an unknown scenario, kv_dtype with a cache type that is not
# quantised, an unknown --attn-rot, a refill, restore or preempt step outside the run, a prefix scenario with no other
# request, the hidden --tokenize on a prompt without text, --kv on a model with sliding-window layers (GGUF_SWA) or
# with a --kv-step past the run, a prompt set of another vocabulary and a prompt file that is not JSON. Run as: cmake
#   -DKVCONF=<kvconf-llama-trace> -DGGUF=<a fixture's .gguf> -DGGUF_SWA=<gemma2-tiny's> -DPROMPTS=<prompts.json>
#   -DWORK=<scratch dir> -P llama_trace_bad_input_test.cmake
cmake_policy(VERSION 3.20)
include(${CMAKE_CURRENT_LIST_DIR}/cli_support.cmake)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(common --prompts "${PROMPTS}" --out "${WORK}/out" --max-new-tokens 2)
kvconf_expect_bad("missing model" "no-such.gguf: --model is not a file" --model "${WORK}/no-such.gguf" ${common})
kvconf_expect_bad("not a GGUF" "gsm8k.json: llama.cpp cannot load this gguf" --model "${PROMPTS}" ${common})
kvconf_expect_bad("unknown cache type" "--cache-type 'q5_k': expected" --model "${GGUF}" ${common} --cache-type q5_k)
kvconf_expect_bad("flash-attn value" "--flash-attn 'yes': expected on or off" --model "${GGUF}" ${common}
                  --flash-attn yes)
kvconf_expect_bad("quantised V cache without flash attention"
                  "--cache-type q8_0 --flash-attn off: llama.cpp refused the context.*flash" --model "${GGUF}"
                  ${common} --cache-type q8_0)
kvconf_expect_bad("an unknown scenario"
                  "--scenario 'swap': expected cache, prefix, batch, chunked, refill, restore, preempt or kv_dtype"
                  --model "${GGUF}" ${common} --scenario swap)
kvconf_expect_bad("kv_dtype without a quantised cache type"
                  "--cache-type f16: --scenario kv_dtype keeps side A's cache in q8_0 or q4_0"
                  --model "${GGUF}" ${common} --scenario kv_dtype --cache-type f16)
kvconf_expect_bad("an unknown --attn-rot" "--attn-rot 'maybe': expected on or off"
                  --model "${GGUF}" ${common} --attn-rot maybe)
kvconf_expect_bad("refill in a run too short" "--scenario refill needs --max-new-tokens 3 or more"
                  --model "${GGUF}" ${common} --scenario refill)
kvconf_expect_bad("restore after the last step" "--at-step 5: expected 1 to 2 for --scenario restore"
                  --model "${GGUF}" --prompts "${PROMPTS}" --out "${WORK}/out" --max-new-tokens 4 --scenario restore
                  --at-step 5)
kvconf_expect_bad("preempt past the last step" "--at-step 4: expected 1 to 3 for --scenario preempt"
                  --model "${GGUF}" --prompts "${PROMPTS}" --out "${WORK}/out" --max-new-tokens 4 --scenario preempt
                  --at-step 4)
file(WRITE "${WORK}/one.json" [=[{"prompts": [{"id": "p0", "ids": [1, 40, 3]}]}]=])
kvconf_expect_bad("prefix with no other request" "one.json: --scenario prefix needs a second prompt"
                  --model "${GGUF}" --prompts "${WORK}/one.json" --out "${WORK}/out" --scenario prefix)
kvconf_expect_bad("--tokenize on a prompt without text" "one.json: prompts\\[0\\].text: empty \\(--tokenize"
                  --model "${GGUF}" --prompts "${WORK}/one.json" --out "${WORK}/out" --tokenize)
kvconf_expect_bad("--kv on a windowed cache" "--kv: the saved cache holds 2 layers, the model 4 \\(a model with sliding"
                  --model "${GGUF_SWA}" ${common} --kv)
kvconf_expect_bad("--kv-step past the run" "--kv-step 2: expected 0 to 1 \\(--max-new-tokens 2\\)" --model "${GGUF}"
                  ${common} --kv --kv-step 2)
file(WRITE "${WORK}/other-vocab.json" [=[{"prompts": [{"id": "p0", "ids": [1, 40000, 3]}]}]=])
kvconf_expect_bad("prompt of another vocabulary" "other-vocab.json: prompts\\[0\\].ids: token 40000 is outside"
                  --model "${GGUF}" --prompts "${WORK}/other-vocab.json" --out "${WORK}/out")
file(WRITE "${WORK}/broken.json" "{\"prompts\": [")
kvconf_expect_bad("prompts not JSON" "broken.json: : not valid json" --model "${GGUF}" --prompts "${WORK}/broken.json"
                  --out "${WORK}/out")
if(EXISTS "${WORK}/out")
  file(GLOB written "${WORK}/out/*")
  if(written)
    message(FATAL_ERROR "bad input wrote traces: ${written}")
  endif()
endif()
