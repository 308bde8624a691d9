#!/usr/bin/env bash
# llama.cpp for kvconf (docs/LLAMA_CPP.md): the llama.cpp that PyPI's llama-cpp-python source distribution bundles
# (a pinned version, verified by its sha256), built as shared CPU libraries (ggml, ggml-cpu, llama) and installed with
# its CMake packages in .deps/llama.cpp/, plus the GGUF converter it ships (convert_hf_to_gguf.py with its conversion/
# and gguf-py/ folders) in .deps/llama.cpp/share/convert/. Nothing is downloaded from anywhere but the Python package
# index, and nothing of it enters the repository. Idempotent: a complete install of the pinned version is kept.
# Usage: scripts/llama_cpp.sh [python]   (python: the interpreter whose pip downloads; default .venv/bin/python)
# Exit 0 when installed (or already there); 1 with the reason otherwise (setup.sh goes on: configure then skips the
# llama.cpp tests, except under the ci preset, which requires it).
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.3.36  # llama-cpp-python; bundles llama.cpp 0c1e570 (2026-10-01), ggml, gguf-py 0.19.0
sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
python="${1:-.venv/bin/python}"
prefix=.deps/llama.cpp
stamp="$prefix/kvconf-llama-cpp-python-$version"
jobs="${KVCONF_JOBS:-2}"

if [ -f "$stamp" ]; then
  echo "llama_cpp.sh: llama.cpp from llama-cpp-python $version already in $prefix"
  exit 0
fi
if ! "$python" -m pip --version >/dev/null 2>&1; then
  echo "llama_cpp.sh: no pip in $python: cannot download llama-cpp-python $version" >&2
  exit 1
fi
start=$(date +%s)
work=.deps/llama.cpp-work
rm -rf "$work" "$prefix"
mkdir -p "$work"
printf 'llama-cpp-python==%s --hash=sha256:%s\n' "$version" "$sha256" > "$work/requirements.txt"
if ! "$python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: --require-hashes \
     -r "$work/requirements.txt" -d "$work"; then
  echo "llama_cpp.sh: could not download llama-cpp-python $version (sdist, sha256 $sha256) from the package index" >&2
  exit 1
fi
tar -xzf "$work/llama_cpp_python-$version.tar.gz" -C "$work" "llama_cpp_python-$version/vendor/llama.cpp"
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
fail() {  # the last lines of a failed step's log, and which step
  tail -n 40 "$work/$1.log" >&2
  echo "llama_cpp.sh: llama.cpp's $1 step failed (the last 40 lines of $work/$1.log above)" >&2
}
rm -f "$src/.git"  # a submodule pointer into the sdist author's checkout: build-info would call git on it
# CPU only, shared libraries, no tools/examples/tests/server/network; the build number names the bundled commit.
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_PREFIX="$PWD/$prefix" \
  -DCMAKE_INSTALL_LIBDIR=lib -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
  -DGGML_OPENMP=OFF -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_RPC=OFF \
  -DLLAMA_BUILD_NUMBER=0 -DLLAMA_BUILD_COMMIT=0c1e570 >"$work/configure.log" 2>&1 || { fail configure; exit 1; }
# Its compiler warnings (ggml's AVX-512 intrinsics: about 14,000 lines) stay in the log, shown only if it fails.
cmake --build "$work/build" -j "$jobs" >"$work/build.log" 2>&1 || { fail build; exit 1; }
cmake --install "$work/build" >"$work/install.log" 2>&1 || { fail install; exit 1; }
# The converter llama.cpp ships, with the two folders it imports (conversion/, gguf-py/), and ggml's private CPU
# headers are not needed: the plugin uses the public ggml.h / ggml-cpu.h / ggml-backend.h installed above.
mkdir -p "$prefix/share/convert"
cp "$src/convert_hf_to_gguf.py" "$prefix/share/convert/"
cp -r "$src/conversion" "$src/gguf-py" "$prefix/share/convert/"
cp "$src/LICENSE" "$prefix/share/convert/LICENSE.llama.cpp"
rm -rf "$work"
echo "llama-cpp-python $version, llama.cpp 0c1e570" > "$stamp"
echo "llama_cpp.sh: llama.cpp built and installed in $prefix in $(( $(date +%s) - start )) s ($(du -sh "$prefix" | cut -f1))"
