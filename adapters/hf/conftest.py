# pytest options and fixtures of the transformers adapter's tests: where the build's fixtures and kvconf program are.
"""--fixtures-dir (the build's fixtures: models/, prompts/), --kvconf-exe (the kvconf program) and --out-dir (a folder
kept for test_hf_scenarios' traces and checks); CTest passes all three (adapters/CMakeLists.txt). Without them the
tests look in build/ beside the source tree, and fail naming what is missing there (adapter_test_support.py, shared
with the vLLM adapter's tests)."""
from __future__ import annotations

import pytest

from adapter_test_support import add_options, fixtures_dir, kvconf_exe

__all__ = ["fixtures_dir", "kvconf_exe"]


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser, "kvconf-hf", "the transformers adapter's tests")
