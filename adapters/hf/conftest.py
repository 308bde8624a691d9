# pytest options and fixtures of the transformers adapter's tests: where the build's fixtures and kvconf program are.
"""--fixtures-dir (the build's fixtures: models/, prompts/), --kvconf-exe (the kvconf program) and --out-dir (a folder
kept for test_hf_scenarios' traces and checks); CTest passes all three (adapters/CMakeLists.txt). Without them the
tests look in build/ beside the source tree, and fail naming what is missing there."""
from __future__ import annotations

from pathlib import Path

import pytest

BUILD = Path(__file__).resolve().parents[2] / "build"


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kvconf-hf", "the transformers adapter's tests")
    g.addoption("--fixtures-dir", default=str(BUILD / "fixtures"),
                help="the build's fixtures folder (models/, prompts/; default build/fixtures)")
    g.addoption("--kvconf-exe", default=str(BUILD / "tools" / "kvconf"), help="the kvconf program")
    g.addoption("--out-dir", default=None,
                help="folder for test_hf_scenarios' traces and checks, emptied first (default: a temporary one)")


@pytest.fixture(scope="session")
def fixtures_dir(request: pytest.FixtureRequest) -> Path:
    """The fixtures folder, with llama2-tiny's config.json and the gsm8k prompt set in it."""
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
