#!/usr/bin/env bash
# kvconf under AddressSanitizer + UndefinedBehaviorSanitizer: configures the asan preset (build-asan/), builds only the
# kvconf_asan_subset target (tests/CMakeLists.txt: the unit tests that never load libtorch and the fast CPU
# conformance suites) and runs those tests. Any sanitizer finding fails: ASan and UBSan halt on the first error
# (the preset compiles with -fno-sanitize-recover=undefined), LeakSanitizer is on. .ci/run calls it after
# scripts/test.sh. Usage: scripts/asan.sh [extra ctest arguments]; KVCONF_JOBS (default 2).
# Writes build-asan/junit-asan.xml.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${KVCONF_JOBS:-2}"
asan="halt_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1"
export ASAN_OPTIONS="$asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
t0=$(date +%s)
cmake --preset asan >/dev/null
cmake --build build-asan -j "$jobs" --target kvconf_asan_subset
t1=$(date +%s)
echo "asan.sh: configured and built kvconf_asan_subset in $((t1 - t0)) s"
# The built subset: the unit label, and the oracle / projection / falsification suites. Tests of executables the
# subset does not build are left out: gtest-discovered ones show as *_NOT_BUILT without labels (not selected); the
# add_test() ones are excluded by name (the kvconf CLI tests, the libtorch and plugin suite batches, the label check,
# the GPU run's plan check, which counts tests of suites the subset does not build, llama.cpp's adapter and ggml plugin
# tests, vLLM's (Python, in its own venv), and RealFixtures, a Python test of converted files the subset does not
# write). Nor the Python tests of the unit label, which run no instrumented code: HfAdapter (the transformers
# adapter's traces) and KvconfDocs (the architecture figures).
# Also left out: the exhaustive numeric sweeps that take a minute or more each under ASan and add nothing it could find
# (they run in the default suite): every-pattern midpoints, the bound sweeps, the bit-for-bit GEMM loops.
not_built='^(KvconfCli|KvconfCtest|ReportsSample|Torch|TorchCuda|LlamaCpp|Vllm[A-Za-z]*|GpuRun|RealFixtures|HfAdapter|KvconfDocs)[./]|^Plugin/ggml/'
sweeps='^Formats/Midpoints\.|^BoundsSweep\.|^AttentionBound\.Emulated|^GemmKernels\..*BitForBit'
ctest --test-dir build-asan -j "$jobs" -L '^(unit|oracle|projection|falsification)$' \
  -LE '^(slow|crash|slurm|install|fuzz)$' \
  -E "$not_built|$sweeps" \
  --output-on-failure --no-tests=error --output-junit junit-asan.xml "$@"
echo "asan.sh: tests ran in $(( $(date +%s) - t1 )) s"
