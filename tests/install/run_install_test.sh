#!/bin/bash
# The installable package tested as a user meets it: `cmake --install` of the build into a fresh prefix, checks of
# what lands there (libraries, headers, the kvconf program, the CMake package; no build-tree paths, no tests), then
# examples/consumer configured with only that prefix, built, and its own ctest run (3 cases: kvconf's sweep passes
# the correct kernel, fails the planted bug, for the right reason). docs/INSTALL.md.
# Usage: run_install_test.sh BUILD_DIR SOURCE_DIR WORK_DIR CMAKE CTEST
set -euo pipefail
BUILD=$(realpath "$1"); SRC=$(realpath "$2"); WORK=$3; CMAKE=${4:-cmake}; CTEST=${5:-ctest}
start=$(date +%s)
say() { echo "install-test: $*"; }
fail() { echo "install-test: FAIL: $*" >&2; exit 1; }
rm -rf "$WORK"; mkdir -p "$WORK"; WORK=$(realpath "$WORK"); P=$WORK/prefix

"$CMAKE" --install "$BUILD" --prefix "$P" >"$WORK/install.log" || fail "cmake --install failed: $(tail -5 "$WORK/install.log")"
for f in bin/kvconf lib/cmake/kvconf/kvconfConfig.cmake lib/cmake/kvconf/kvconfConfigVersion.cmake \
         lib/cmake/kvconf/kvconfTargets.cmake lib/libkvconf_conformance.a lib/libkvconf_numerics.a \
         include/kvconf/kernels/registry.hpp include/kvconf/conformance/sweep.hpp include/kvconf/plugin.h; do
  [ -e "$P/$f" ] || fail "$P/$f was not installed"
done
"$P/bin/kvconf" --version >/dev/null || fail "the installed kvconf does not run"
if grep -l -e "$SRC/" -e "$BUILD/" "$P"/lib/cmake/kvconf/*.cmake; then
  fail "the installed CMake package names the source or build tree (above): not relocatable"
fi
if find "$P" -name '*_test' -o -name '*gtest*' -o -name 'kvconf_make_fixtures' | grep .; then
  fail "tests or build-only programs were installed (above)"
fi
say "installed $(find "$P" -type f | wc -l) files ($(du -sh "$P" | cut -f1)) in $(( $(date +%s) - start )) s"

# The consumer sees kvconf only through the prefix.
"$CMAKE" -S "$SRC/examples/consumer" -B "$WORK/consumer" -DCMAKE_PREFIX_PATH="$P" >"$WORK/configure.log" 2>&1 ||
  fail "configuring examples/consumer against $P failed: $(tail -20 "$WORK/configure.log")"
grep -q "kvconf_DIR:PATH=$P/lib/cmake/kvconf" "$WORK/consumer/CMakeCache.txt" ||
  fail "find_package(kvconf) did not take the installed package: $(grep kvconf_DIR "$WORK/consumer/CMakeCache.txt")"
"$CMAKE" --build "$WORK/consumer" -j 2 >"$WORK/build.log" 2>&1 || fail "building examples/consumer failed: $(grep -m5 -A5 error "$WORK/build.log")"
if grep -rhoE -- "-I$SRC/[a-z]+/include" "$WORK/consumer/CMakeFiles" | grep .; then
  fail "the consumer compiled against kvconf's source tree (above), not the installed headers"
fi
say "examples/consumer configured and built in $(( $(date +%s) - start )) s (total so far)"
(cd "$WORK/consumer" && "$CTEST" --output-on-failure) >"$WORK/ctest.log" 2>&1 || fail "the consumer's ctest failed: $(cat "$WORK/ctest.log")"
cat "$WORK/ctest.log"
grep -q "100% tests passed, 0 tests failed out of 3" "$WORK/ctest.log" || fail "expected the consumer's 3 cases to pass"
"$WORK/consumer/engine_conformance_test" --gtest_filter=KvconfSweep.GemvBugIsCaught | grep "GEMV bug:" ||
  fail "GemvBugIsCaught printed no summary"
say "PASS in $(( $(date +%s) - start )) s"
