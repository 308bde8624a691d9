# pytest options and fixtures of the vLLM adapter's tests: the build's fixtures, the kvconf program, and vLLM's Python.
"""--fixtures-dir, --kvconf-exe, --out-dir (adapters/hf/adapter_test_support.py, shared with the transformers adapter's
tests) and --vllm-python (the .venv-vllm interpreter that runs kvconf_vllm_trace.py: vLLM is not in the project's
venv, docs/VLLM.md); CTest passes all four (adapters/CMakeLists.txt). Without them the tests look in build/ and
.venv-vllm/ beside the source tree, and fail naming what is missing there."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hf"))

from adapter_test_support import ROOT, add_options, existing_file, fixtures_dir, kvconf_exe  # noqa: E402

__all__ = ["fixtures_dir", "kvconf_exe"]


def pytest_addoption(parser: pytest.Parser) -> None:
    g = add_options(parser, "kvconf-vllm", "the vLLM adapter's tests")
    g.addoption("--vllm-python", default=str(ROOT / ".venv-vllm" / "bin" / "python"),
                help="the Python with vLLM (scripts/vllm.sh; default .venv-vllm/bin/python)")


@pytest.fixture(scope="session")
def vllm_python(request: pytest.FixtureRequest) -> Path:
    return existing_file(request, "--vllm-python", "no Python with vLLM (run scripts/vllm.sh, or pass --vllm-python)")
