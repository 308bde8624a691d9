#!/usr/bin/env bash
# kvconf fuzzing: install clang + libFuzzer (Debian) if missing, configure build-fuzz/ with clang and
# -fsanitize=fuzzer-no-link,address,undefined, build the harnesses of fuzz/, and run each for a bounded time
# (ctest -L fuzz). docs/FUZZING.md.
# Usage: scripts/fuzz.sh [--no-install] [--build-only] [--seconds N] [-R REGEX]   (N: per harness, default 15)
set -euo pipefail
cd "$(dirname "$0")/.."

install=1
run=1
seconds=15
ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) install=0 ;;
    --build-only) run=0 ;;
    --seconds) seconds="$2"; shift ;;
    -R) ctest_args+=(-R "$2"); shift ;;
    -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1' (expected --no-install, --build-only, --seconds N or -R REGEX)" >&2; exit 2 ;;
  esac
  shift
done

# Debian packages: clang, and the compiler-rt of that clang's major version (libclang_rt.fuzzer*.a, the sanitizer
# runtimes). Only this script installs them: the default build (scripts/setup.sh) needs none of it.
need_install() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed" && return 1 || return 0; }
apt_install() {
  local sudo_cmd=()
  [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "$@"
}
if [ "$install" = 1 ]; then
  if ! command -v clang++ >/dev/null 2>&1; then
    echo "fuzz.sh: installing clang"
    apt_install clang
  fi
  major=$(clang++ -dumpversion | cut -d. -f1)
  missing=()
  for p in "libclang-rt-${major}-dev"; do
    need_install "$p" && missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "fuzz.sh: installing ${missing[*]}"
    apt_install "${missing[@]}"
  fi
fi
command -v clang++ >/dev/null 2>&1 || { echo "fuzz.sh: clang++ not found (run without --no-install)" >&2; exit 2; }

flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
# No libtorch, CUDA, tests or benchmarks in this build: the harnesses need the parsers' libraries only.
cmake -S . -B build-fuzz -G "Unix Makefiles" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DKVCONF_BUILD_FUZZERS=ON -DKVCONF_BUILD_TESTS=OFF -DKVCONF_BUILD_BENCHMARKS=OFF \
  -DKVCONF_ENABLE_CUDA=OFF -DKVCONF_PYTHON=false -DKVCONF_BUILD_PYTHON=OFF -DKVCONF_FUZZ_SECONDS="$seconds" >/dev/null
nice -n 10 cmake --build build-fuzz -j "${KVCONF_JOBS:-2}" --target kvconf_fuzzers

[ "$run" = 1 ] || exit 0
# One harness at a time (each runs one libFuzzer job); a crash, leak, timeout or OOM fails its test, and the input is
# under build-fuzz/fuzz/artifacts/<harness>/.
nice -n 10 ctest --test-dir build-fuzz -L '^fuzz$' --output-on-failure "${ctest_args[@]}"
