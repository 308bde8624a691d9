# pytest options and fixtures of the vLLM adapter's tests: the build's fixtures, the kvconf program, and vLLM's Python.
"""--fixtures-dir (the build's fixtures: models/, prompts/), --kvconf-exe (the kvconf program), --vllm-python (the
.venv-vllm interpreter that runs kvconf_vllm_trace.py: vLLM is not in the project's venv, docs/VLLM.md) and --out-dir
(a folder kept for the traces and checks); CTest passes all four (adapters/CMakeLists.txt). Without them the tests
look in build/ and .venv-vllm/ beside the source tree, and fail naming what is missing there."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kvconf-vllm", "the vLLM adapter's tests")
    g.addoption("--fixtures-dir", default=str(ROOT / "build" / "fixtures"),
                help="the build's fixtures folder (models/, prompts/; default build/fixtures)")
    g.addoption("--kvconf-exe", default=str(ROOT / "build" / "tools" / "kvconf"), help="the kvconf program")
    g.addoption("--vllm-python", default=str(ROOT / ".venv-vllm" / "bin" / "python"),
                help="the Python with vLLM (scripts/vllm.sh; default .venv-vllm/bin/python)")
    g.addoption("--out-dir", default=None, help="folder for the traces and checks, emptied first (default: temporary)")


@pytest.fixture(scope="session")
def fixtures_dir(request: pytest.FixtureRequest) -> Path:
    folder = Path(request.config.getoption("--fixtures-dir"))
    for p in (folder / "models" / "llama2-tiny" / "config.json", folder / "prompts" / "gsm8k.json"):
        if not p.is_file():
            pytest.fail(f"fixture {p} missing (build the kvconf_fixture_files target, or pass --fixtures-dir)")
    return folder


@pytest.fixture(scope="session")
def kvconf_exe(request: pytest.FixtureRequest) -> Path:
    exe = Path(request.config.getoption("--kvconf-exe"))
    if not exe.is_file():
        pytest.fail(f"{exe}: no kvconf program (build the kvconf target, or pass --kvconf-exe)")
    return exe


@pytest.fixture(scope="session")
def vllm_python(request: pytest.FixtureRequest) -> Path:
    exe = Path(request.config.getoption("--vllm-python"))
    if not exe.is_file():
        pytest.fail(f"{exe}: no Python with vLLM (run scripts/vllm.sh, or pass --vllm-python)")
    return exe
