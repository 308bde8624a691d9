#!/usr/bin/env bash
# kvconf: run the whole default test suite (everything but the `slow` sweeps), with JUnit XML.
# Usage: scripts/test.sh [extra ctest arguments]   e.g. scripts/test.sh -L unit
# Writes build/junit.xml. Set KVCONF_SKIP_SETUP=1 to skip the install/build step.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${KVCONF_SKIP_SETUP:-0}" = 1 ] || scripts/setup.sh
ctest --preset ci -j "${KVCONF_JOBS:-2}" "$@"
