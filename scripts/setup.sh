#!/usr/bin/env bash
# kvconf set-up: install the Debian packages kvconf needs (if missing), configure and build.
# Usage: scripts/setup.sh [--no-install] [--preset NAME]   (default preset: ci, build dir: build/)
set -euo pipefail
cd "$(dirname "$0")/.."

preset=ci
install=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) install=0 ;;
    --preset) preset="$2"; shift ;;
    -h|--help) sed -n '2,3p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$1' (expected --no-install or --preset NAME)" >&2; exit 2 ;;
  esac
  shift
done

# Debian packages (DESIGN.md "Build and dependencies"); libbenchmark-dev for the oracle benchmark; ccache so that the
# Python package's build reuses the main build's objects (cmake/KvconfCcache.cmake).
packages=(cmake g++ make pkg-config ccache libgtest-dev libmpfr-dev libgmp-dev libboost-dev nlohmann-json3-dev
          libsentencepiece-dev libcli11-dev libfmt-dev libbenchmark-dev libdlpack-dev python3-dev)

if [ "$install" = 1 ]; then
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup.sh: installing ${missing[*]}"
    sudo_cmd=()
    [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
  else
    echo "setup.sh: all Debian packages present"
  fi
fi

# Python packages (scripts/requirements.txt) in .venv: torch (libtorch for kernels/torch), transformers & co.
# A machine whose python already has torch (the lent GPU machine: torch 2.11 with CUDA) keeps it: the venv sees
# the system's packages and nothing is downloaded. If the install is impossible, configure still succeeds (the
# torch tests skip with the reason) except under the ci preset, which requires torch.
venv=.venv
if [ "${KVCONF_NO_VENV:-0}" != 1 ] && [ ! -x "$venv/bin/python" ]; then
  python3 -m venv --system-site-packages "$venv" || echo "setup.sh: could not create $venv (python3 -m venv failed)"
fi

# llama.cpp (docs/LLAMA_CPP.md): built from PyPI's llama-cpp-python sdist into .deps/llama.cpp (two to three minutes
# on 2 cores, once), in the background while pip fills the venv below: pip mostly waits on the network and unpacks,
# the build mostly computes (README, "Where .ci/run's time goes"). If it cannot be built, configure still succeeds and
# the llama.cpp tests skip with the reason, except under the ci preset, which requires it.
llama_python=python3
[ -x "$venv/bin/python" ] && llama_python="$venv/bin/python"
scripts/llama_cpp.sh "$llama_python" &
llama_pid=$!

# vLLM for the CPU (docs/VLLM.md): scripts/requirements-vllm.txt (every wheel by sha256) into its own venv, .venv-vllm,
# in the background too (about 4 minutes, mostly download and unpacking; once, then kept). If it cannot be installed,
# configure still succeeds and the vLLM tests skip with the reason, except under the ci preset, which requires it.
vllm_pid=
if [ "${KVCONF_NO_VENV:-0}" != 1 ]; then
  scripts/vllm.sh &
  vllm_pid=$!
fi

if [ "${KVCONF_NO_VENV:-0}" != 1 ]; then
  if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -c 'import torch, transformers, safetensors, numpy, nanobind, scikit_build_core, pytest, jsonschema, mypy, ruff, gguf' 2>/dev/null; then
    echo "setup.sh: installing scripts/requirements.txt into $venv (torch wheel ~4.6 GB on disk)"
    start=$(date +%s)
    if "$venv/bin/python" -m pip install -q --disable-pip-version-check -r scripts/requirements.txt; then
      echo "setup.sh: Python packages installed in $(( $(date +%s) - start )) s ($(du -sh "$venv" | cut -f1) in $venv)"
    else
      echo "setup.sh: torch could not be installed (pip failed): the torch kernels will skip, and the ci preset fails"
    fi
  fi
fi

# The real trained model (docs/MODELS.md "SmolLM2-135M-Instruct"): a 93 MB wheel by version and sha256, seconds.
scripts/smollm2.sh "$llama_python" || echo "setup.sh: SmolLM2-135M-Instruct could not be fetched: its tests will skip (the ci preset fails)"

wait "$llama_pid" || echo "setup.sh: llama.cpp could not be built: its tests will skip (the ci preset fails)"
if [ -n "$vllm_pid" ]; then
  wait "$vllm_pid" || echo "setup.sh: vLLM could not be installed: its tests will skip (the ci preset fails)"
fi

start=$(date +%s)
cmake --preset "$preset"
cmake --build --preset "$preset" -j "${KVCONF_JOBS:-2}"
echo "setup.sh: configured and built preset $preset in $(( $(date +%s) - start )) s"

# The Python package kvconf into .venv (pyproject.toml, docs/PYTHON.md): built from this tree by the venv's pinned
# scikit-build-core and nanobind, in build/pip/ (kept, so a second run recompiles only what changed).
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import nanobind, scikit_build_core' 2>/dev/null; then
  start=$(date +%s)
  command -v ccache >/dev/null && ccache --zero-stats >/dev/null  # to count the package build's hits alone
  # A build/pip/ configured before setup.sh named the compilers keeps Python's g++ in its CMake cache (the environment's
  # CXX only counts at the first configure): start such a one afresh, or none of its objects would come from ccache.
  for cache in build/pip/*/CMakeCache.txt; do
    [ -f "$cache" ] || continue
    if ! grep -qx "CMAKE_CXX_COMPILER:FILEPATH=$(command -v "${CXX:-c++}")" "$cache"; then
      echo "setup.sh: $(dirname "$cache") was configured with another C++ compiler: configuring it afresh"
      rm -rf "$(dirname "$cache")"
    fi
  done
  # CC/CXX as CMake chose them for the main build (scikit-build-core would otherwise take Python's sysconfig g++, and
  # ccache keys on the compiler's name: no object would be shared); install_test.sh does the same for build/pip/.
  CC="${CC:-cc}" CXX="${CXX:-c++}" CMAKE_BUILD_PARALLEL_LEVEL="${KVCONF_JOBS:-2}" "$venv/bin/python" -m pip install -q \
    --disable-pip-version-check --no-build-isolation --no-deps .
  echo "setup.sh: Python package kvconf installed in $venv in $(( $(date +%s) - start )) s"
  if command -v ccache >/dev/null; then  # the objects it took from the main build (cmake/KvconfCcache.cmake)
    hits=$(ccache --print-stats | awk '$1 ~ /^(direct|preprocessed)_cache_hit$/ { h += $2 }
      $1 == "cache_miss" { m = $2 } END { printf "%d hits, %d misses", h, m }')
    echo "setup.sh: ccache during the package build: $hits"
  fi
fi
