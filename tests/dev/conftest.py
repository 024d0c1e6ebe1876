"""The `launcher` fixture: supervisors of fake programs, killed at the end of each test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.dev.harness import Launcher


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    started = Launcher(tmp_path)
    yield started
    started.close()
