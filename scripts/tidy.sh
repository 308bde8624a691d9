#!/usr/bin/env bash
# kvconf clang-tidy: configure build-tidy/ (clang, compile_commands.json; nothing is built) and run clang-tidy with the
# repository's .clang-tidy over kvconf's own sources (not tests/, not third-party code). Exit 1 on any finding, with
# every finding printed. docs/TIDY.md.
# Usage: scripts/tidy.sh [--no-install] [--no-configure] [-j N] [REGEX]   (REGEX: only files whose path matches)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

install=1
configure=1
jobs=${KVCONF_JOBS:-2}
regex=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) install=0 ;;
    --no-configure) configure=0 ;;
    -j) jobs="$2"; shift ;;
    -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
    -*) echo "tidy.sh: unknown option '$1' (expected --no-install, --no-configure, -j N or a file regex)" >&2; exit 2 ;;
    *) regex="$1" ;;
  esac
  shift
done

# Debian packages: clang (the compile database is clang's) and clang-tidy; only when tidy is asked for.
if [ "$install" = 1 ]; then
  missing=()
  for p in clang clang-tidy; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "tidy.sh: installing ${missing[*]}"
    sudo_cmd=()
    [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi
command -v clang-tidy >/dev/null 2>&1 || { echo "tidy.sh: clang-tidy not found (run without --no-install)" >&2; exit 2; }

if [ "$configure" = 1 ]; then
  # No libtorch or CUDA sources (optional parts, third-party headers), no tests or benchmarks: kvconf's own code.
  cmake -S . -B build-tidy -G "Unix Makefiles" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DKVCONF_BUILD_TESTS=OFF \
    -DKVCONF_BUILD_BENCHMARKS=OFF -DKVCONF_ENABLE_CUDA=OFF -DKVCONF_PYTHON=false -DKVCONF_BUILD_PYTHON=OFF \
    -DKVCONF_TIDY=ON >/dev/null
fi

# The C++ sources of the compile database (C files: the plugin ABI examples, checked by their compiler warnings).
mapfile -t files < <(python3 -c '
import json, sys
for e in json.load(open("build-tidy/compile_commands.json")):
    f = e["file"]
    if f.endswith(".cpp") and "/tests/" not in f: print(f)' | sort -u | grep -E "${regex:-.}")
[ ${#files[@]} -gt 0 ] || { echo "tidy.sh: no source matches '$regex'" >&2; exit 2; }

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
start=$(date +%s)
export logs
# One clang-tidy per file, $jobs at a time; each file's findings go to its own log so the output is not interleaved.
printf '%s\n' "${files[@]}" | nice -n 10 xargs -P "$jobs" -I{} sh -c \
  'clang-tidy -p build-tidy --quiet --use-color=false "$1" >"$logs/$(echo "$1" | tr / _).log" 2>&1 || true' _ {}
findings=$(cat "$logs"/*.log | grep -cE '(warning|error): .*\[[a-z]' || true)
cat "$logs"/*.log | grep -vE '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$|^Suppressed|^Use -header-filter|^Error while processing' || true
echo "tidy.sh: ${#files[@]} files, ${findings} findings, $(( $(date +%s) - start )) s (${jobs} jobs; .clang-tidy at ${root})"
[ "$findings" = 0 ]
