"""gunicorn.conf.py under a real gunicorn: the access log follows GUNICORN_ACCESS_LOG."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.core.test_metrics_gunicorn import _wait_until_serving, free_port
from tests.core.test_production_safety import PRODUCTION
from tests.support.processes import REPO, subprocess_env

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def served_output(tmp_path: Path, access_log: str) -> list[str]:
    """gunicorn's stdout lines (JSON logging) around three pings and a clean stop."""
    port = free_port()
    out = tmp_path / f"gunicorn-{access_log or 'off'}.log"
    env = subprocess_env(
        **{
            **PRODUCTION,
            "ALLOWED_HOSTS": "127.0.0.1",
            "HTTPS": "false",
            "LOG_FORMAT": "json",
            "GUNICORN_BIND": f"127.0.0.1:{port}",
            "GUNICORN_ACCESS_LOG": access_log,
            "GUNICORN_LOG_LEVEL": "info",
            "WEB_CONCURRENCY": "1",
            "GUNICORN_THREADS": "1",
        }
    )
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "deskcomm.wsgi"],
            cwd=REPO,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_until_serving(base, proc)
            for _ in range(3):
                assert httpx.get(f"{base}/api/ping", timeout=10).status_code == 200
        finally:
            proc.terminate()
            assert proc.wait(timeout=30) == 0
    return out.read_text().splitlines()


def access_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if '"gunicorn.access"' in line and "/api/ping" in line]


def test_no_access_lines_unless_asked(tmp_path: Path) -> None:
    lines = served_output(tmp_path, "")
    assert any("Booting worker" in line for line in lines)  # the log itself works
    assert access_lines(lines) == []


def test_access_lines_on_stdout_when_asked(tmp_path: Path) -> None:
    assert len(access_lines(served_output(tmp_path, "-"))) >= 3
