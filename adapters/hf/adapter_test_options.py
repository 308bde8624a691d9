# The pytest options and fixtures every adapter's tests share (adapters/hf/conftest.py, adapters/vllm/conftest.py):
# where the build's fixtures and the kvconf program are, and a folder kept for traces and checks.
"""add_options(parser, group, description) adds --fixtures-dir, --kvconf-exe and --out-dir; the fixtures fixtures_dir
and kvconf_exe fail naming what is missing. Defaults: build/ beside the source tree."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"


def add_options(parser: pytest.Parser, group: str, description: str) -> pytest.OptionGroup:
    g = parser.getgroup(group, description)
    g.addoption("--fixtures-dir", default=str(BUILD / "fixtures"),
                help="the build's fixtures folder (models/, prompts/; default build/fixtures)")
    g.addoption("--kvconf-exe", default=str(BUILD / "tools" / "kvconf"), help="the kvconf program")
    g.addoption("--out-dir", default=None,
                help="folder for the traces and checks, emptied first (default: a temporary one)")
    return g


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
