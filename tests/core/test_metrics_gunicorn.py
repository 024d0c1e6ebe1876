"""Multiprocess mode: gunicorn with several workers, /metrics sums every worker's counters."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.core.test_production_safety import PRODUCTION
from tests.support.gunicorn import running_gunicorn

pytestmark = pytest.mark.slow


@pytest.fixture
def gunicorn(tmp_path: Path, transactional_db: None) -> Iterator[tuple[str, Path]]:
    metrics_dir = tmp_path / "prom"
    with running_gunicorn(
        PROMETHEUS_MULTIPROC_DIR=str(metrics_dir), WEB_CONCURRENCY="3", GUNICORN_THREADS="1"
    ) as (base, _):
        yield base, metrics_dir


def ping_count(base: str) -> float:
    response = httpx.get(
        f"{base}/metrics", headers={"Authorization": f"Bearer {PRODUCTION['METRICS_TOKEN']}"}
    )
    assert response.status_code == 200
    return sum(
        s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
        if s.name == "deskcomm_http_requests_total" and s.labels.get("route") == "api/ping"
    )


def test_every_scrape_sums_all_workers(gunicorn: tuple[str, Path]) -> None:
    base, metrics_dir = gunicorn
    already = ping_count(base)  # the start-up probe's requests
    # Which worker accepts a new connection is up to the kernel (on a busy machine one worker may
    # take them all for a while): keep opening new connections until a second worker process has
    # answered, with a deadline, and count exactly what was sent.
    sent = 0
    deadline = time.monotonic() + 60
    while len(writers(metrics_dir)) < 2 or sent < 30:
        assert time.monotonic() < deadline, "the requests never reached a second worker process"
        with httpx.Client() as client:  # a new connection each time: spread over the workers
            assert client.get(f"{base}/api/ping").status_code == 200
        sent += 1
    # Whichever worker answers the scrape, it reports the sum over all of them.
    assert [ping_count(base) for _ in range(5)] == [already + sent] * 5


def writers(metrics_dir: Path) -> set[str]:
    """The worker processes that have written samples (one file set per pid)."""
    return {name.rsplit("_", 1)[-1] for name in os.listdir(metrics_dir)}
