#!/usr/bin/env bash
# Install.PythonPackageInFreshVenv (label install, .ci/run): `pip install` of this tree into an empty venv, as a user
# does (build isolation: pip fetches the pinned scikit-build-core and nanobind), then `pytest examples/python` with
# the plugin found through its pytest11 entry point. torch and pytest are not installed again (a 4.6 GB wheel): a
# .pth file lets the fresh venv see the project venv's package folders *after* its own, and the test checks that kvconf
# was imported from the fresh venv, not from there. Prints the install time and the installed size.
# Usage: install_test.sh <source dir> <project venv python> <work dir>
set -euo pipefail
src="$1"; project_python="$2"; work="$3"
rm -rf "$work"; mkdir -p "$work"
python_base=$("$project_python" -c 'import sys; print(sys.base_prefix)')/bin/python3
"$python_base" -m venv "$work/venv"
v="$work/venv/bin/python"
start=$(date +%s)
# the compilers setup.sh built build/pip/ with (CMake reads CC/CXX only at a folder's first configure; setup.sh starts
# afresh a build/pip/ whose cache names another compiler)
CC="${CC:-cc}" CXX="${CXX:-c++}" "$v" -m pip install -q --disable-pip-version-check "$src"
echo "install_test: pip install took $(( $(date +%s) - start )) s"
site=$("$v" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "install_test: installed kvconf: $(du -sh "$site/kvconf" | cut -f1) ($(ls "$site"/kvconf/_core*.so))"
"$project_python" -c 'import sys; print("\n".join(p for p in sys.path if p.endswith(("site-packages", "dist-packages"))))' \
  > "$site/zz_project_venv.pth"
"$v" - <<'PY'
import kvconf, sys
assert kvconf.__file__.startswith(sys.prefix), f"kvconf imported from {kvconf.__file__}, not from the fresh venv"
print(f"install_test: kvconf {kvconf.__version__} from {kvconf.__file__}")
PY
cd "$work"
"$v" -m pytest -q -p no:cacheprovider -rx "$src/examples/python"
