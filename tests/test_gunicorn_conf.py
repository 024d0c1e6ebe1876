"""gunicorn.conf.py under a real gunicorn: the access log follows GUNICORN_ACCESS_LOG."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.gunicorn import running_gunicorn

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def served_output(tmp_path: Path, access_log: str) -> list[str]:
    """gunicorn's stdout lines (JSON logging) around three pings and a clean stop."""
    out = tmp_path / f"gunicorn-{access_log or 'off'}.log"
    with (
        out.open("wb") as sink,
        running_gunicorn(
            output=sink,
            LOG_FORMAT="json",
            GUNICORN_ACCESS_LOG=access_log,
            GUNICORN_LOG_LEVEL="info",
            WEB_CONCURRENCY="1",
            GUNICORN_THREADS="1",
        ) as (base, _),
    ):
        for _ in range(3):
            assert httpx.get(f"{base}/api/ping", timeout=10).status_code == 200
    return out.read_text().splitlines()


def access_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if '"gunicorn.access"' in line and "/api/ping" in line]


def test_no_access_lines_unless_asked(tmp_path: Path) -> None:
    lines = served_output(tmp_path, "")
    assert any("Booting worker" in line for line in lines)  # the log itself works
    assert access_lines(lines) == []


def test_access_lines_on_stdout_when_asked(tmp_path: Path) -> None:
    assert len(access_lines(served_output(tmp_path, "-"))) >= 3
