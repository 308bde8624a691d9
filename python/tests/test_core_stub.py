"""The type stub of the compiled module (python/kvconf/_core.pyi, committed: type checkers read it, and mypy checks the
package against it) is what nanobind.stubgen makes of this build's kvconf._core with python/core_stub.patterns. A
binding added, removed or given another signature without the stub remade fails here, naming the lines that differ
and the command that remakes it."""
from __future__ import annotations

import difflib
import subprocess
import sys
from pathlib import Path

import kvconf

SOURCE = Path(__file__).resolve().parents[1]  # python/
STUB = SOURCE / "kvconf" / "_core.pyi"
PATTERNS = SOURCE / "core_stub.patterns"
REMAKE = ("PYTHONPATH=build/python .venv/bin/python -m nanobind.stubgen -q -m kvconf._core "
          "-p python/core_stub.patterns -o python/kvconf/_core.pyi")


def stubgen(out: Path) -> str:
    """nanobind.stubgen's stub of the kvconf._core this process imports (PYTHONPATH: the build's staged package)."""
    subprocess.run([sys.executable, "-m", "nanobind.stubgen", "-q", "-m", "kvconf._core", "-p", str(PATTERNS),
                    "-o", str(out)], check=True, capture_output=True, text=True, timeout=120)
    return out.read_text(encoding="utf-8")


def test_the_committed_stub_is_stubgens_output_for_this_build(tmp_path: Path) -> None:
    made = stubgen(tmp_path / "_core.pyi")
    committed = STUB.read_text(encoding="utf-8")
    diff = list(difflib.unified_diff(committed.splitlines(), made.splitlines(), "committed", "stubgen", lineterm=""))
    assert not diff, (f"{STUB} is stale for {kvconf._core.__file__}; remake it from the top folder with\n  {REMAKE}\n"
                      + "\n".join(diff[:40]))


def test_the_stub_states_every_public_name_of_the_module() -> None:
    """What stubgen leaves out (dunders) is added by the patterns: kvconf.__version__ is typed too."""
    stub = STUB.read_text(encoding="utf-8")
    names = [n for n in dir(kvconf._core) if not n.startswith("_")] + ["__version__"]
    missing = [n for n in names if f"def {n}(" not in stub and f"class {n}" not in stub and f"{n}: " not in stub]
    assert not missing, f"{STUB} does not declare {missing}"
