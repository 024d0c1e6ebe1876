"""The project is compiled once before a test run, whatever PYTHONDONTWRITEBYTECODE says."""

from __future__ import annotations

import importlib.util
import os

import pytest

from dev import bytecode
from dev.bootstrap import REPO_ROOT


def test_the_sources_are_the_project_s_packages_and_scripts_not_the_venv() -> None:
    sources = bytecode.project_sources()
    assert {"eventbus", "core", "tests", "dev", "manage.py"} <= set(sources)
    assert ".venv" not in sources and "docs" not in sources  # docs has no __init__.py


def test_compiling_writes_the_cache_even_when_the_environment_forbids_writing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # the compiler inherits it, as on CI
    source = REPO_ROOT / "eventbus" / "store" / "ids.py"
    cached = importlib.util.cache_from_source(str(source))
    if os.path.exists(cached):
        os.remove(cached)  # (a process importing it meanwhile compiles it from source)
    bytecode.compile_project()
    assert os.path.getmtime(cached) >= os.path.getmtime(source)
