"""A real gunicorn serving the project on a free loopback port, with production settings."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

import httpx

from tests.core.test_production_safety import PRODUCTION
from tests.support.processes import REPO, subprocess_env
from tests.support.proxy import free_port


@contextmanager
def running_gunicorn(
    *, output: IO[bytes] | int = subprocess.DEVNULL, **env: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """(base URL, process) once a worker answers `/api/ping`; stopped by SIGTERM, which must
    end it with exit code 0. `env` overrides the production settings (workers, threads...)."""
    port = free_port()
    environment = subprocess_env(
        **{
            **PRODUCTION,
            "ALLOWED_HOSTS": "127.0.0.1",
            "HTTPS": "false",
            "GUNICORN_BIND": f"127.0.0.1:{port}",
            **env,
        }
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "deskcomm.wsgi"],
        cwd=REPO,
        env=environment,
        stdout=output,
        stderr=subprocess.STDOUT if output is not subprocess.DEVNULL else subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_serving(base, proc)
        yield base, proc
    finally:
        proc.terminate()
        try:
            code = proc.wait(timeout=STARTED_WITHIN)
        except subprocess.TimeoutExpired:
            proc.kill()  # never left running for a later test to trip over
            proc.wait()
            raise
        assert code == 0


# Generous: on a loaded 2-core machine (the suite's parallel workers and other work) gunicorn and
# its workers have needed over 30 s to start or stop; a passing test never waits it out.
STARTED_WITHIN = 120.0


def _wait_until_serving(base: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + STARTED_WITHIN
    while time.monotonic() < deadline:
        assert proc.poll() is None, "gunicorn exited"
        try:
            httpx.get(f"{base}/api/ping", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)  # polling for the port to open, with a deadline
    raise AssertionError("gunicorn did not start")
