"""/metrics after a known workload: counters and queue gauges match; the token is required."""

from __future__ import annotations

import datetime as dt
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import time_machine
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.test import Client
from django.test.utils import override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

import eventbus
from core.metrics import top_organizations
from core.models import Organization
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store.metrics import EventTypeLabels, count_settled
from jobs.registry import Job, job_enqueue, job_run, jobs
from tests.support.processes import subprocess_env

TOKEN = "scrape-token-for-tests"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape() -> Samples:
    with override_settings(METRICS_TOKEN=TOKEN):
        response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
    }


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum over the series of `name` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, keys), v in samples.items() if n == name and wanted <= set(keys))


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return total(after, name, **labels) - total(before, name, **labels)


def series(samples: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {keys: v for (n, keys), v in samples.items() if n == name}


def emit(org: Organization, event_type: str, n: int) -> None:
    for i in range(n):
        eventbus.emit(event_type, organization=org, entity_kind="t", payload={"n": i})


@pytest.mark.django_db(transaction=True)
def test_counts_and_queue_shape_after_a_known_workload(
    org: Organization, side_effects: None
) -> None:
    before = scrape()
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        emit(org, "test.effect", 3)  # 3 deliveries each for effect-a/b/c
        with override_settings(EVENTBUS={**settings.EVENTBUS, "MAX_ATTEMPTS": 1}):
            emit(org, "test.flaky", 2)  # die on their first failure
        Worker(
            WorkerOptions(consumers=["effect-a-worker", "flaky-worker"], listen=False)
        ).run_once()
        clock.shift(dt.timedelta(seconds=90))
        after = scrape()

    counted = "deskcomm_eventbus_events_emitted_total"
    assert delta(before, after, counted, event_type="test.effect") == 3
    assert delta(before, after, counted, event_type="test.flaky") == 2
    processed = "deskcomm_eventbus_deliveries_processed_total"
    assert delta(before, after, processed, consumer="effect-a-worker", outcome="done") == 3
    assert delta(before, after, processed, consumer="flaky-worker", outcome="dead") == 2
    assert delta(before, after, processed, consumer="flaky-worker", outcome="retry") == 0
    assert delta(before, after, processed, event_type="test.flaky", outcome="dead") == 2
    runs = "deskcomm_eventbus_handler_duration_seconds_count"
    assert delta(before, after, runs, consumer="effect-a-worker") == 3
    assert delta(before, after, runs, consumer="flaky-worker", event_type="test.flaky") == 2
    # Queue shape at scrape time (absolute values: this test owns the database), by consumer and
    # event type (seed 000 §10.1).
    pending, dead = "deskcomm_eventbus_deliveries_pending", "deskcomm_eventbus_deliveries_dead"
    assert after[(pending, (("consumer", "effect-b-worker"), ("event_type", "test.effect")))] == 3
    assert after[(dead, (("consumer", "flaky-worker"), ("event_type", "test.flaky")))] == 2
    assert total(after, pending, consumer="effect-a-worker") == 0
    lag = after[
        (
            "deskcomm_eventbus_lag_seconds",
            (("consumer", "effect-c-worker"), ("event_type", "test.effect")),
        )
    ]
    assert lag == pytest.approx(90, abs=1)


def test_event_type_labels_are_bounded() -> None:
    labels = EventTypeLabels()
    with override_settings(EVENTBUS={**settings.EVENTBUS, "METRICS_MAX_EVENT_TYPES": 2}):
        assert [labels(t) for t in ("test.effect", "test.flaky", "test.job")] == [
            "test.effect",
            "test.flaky",
            "other",  # past the cap
        ]
        assert labels("test.effect") == "test.effect"  # kept ones stay
        assert labels("no.such_type") == "other" and labels(None) == "other"


@pytest.mark.django_db
def test_settled_outcomes_are_counted_by_event_type() -> None:
    before = scrape()
    count_settled(
        {1: "effect-a-worker", 2: "flaky-worker"},
        done=[1],
        failed=[2],
        dead=[2],
        event_type_of={1: "test.effect", 2: "test.flaky"},
    )
    count_settled({3: "effect-a-worker"}, done=[3], failed=[], dead=[])  # the old call shape
    after = scrape()
    processed = "deskcomm_eventbus_deliveries_processed_total"
    assert delta(before, after, processed, event_type="test.effect", outcome="done") == 1
    assert delta(before, after, processed, event_type="test.flaky", outcome="dead") == 1
    assert delta(before, after, processed, consumer="effect-a-worker", event_type="other") == 1


@pytest.mark.django_db
def test_job_queue_size_and_last_job_runs(clean_jobs_queue: None) -> None:
    job_enqueue(name="dlq-alert", slot="2026-01-01T00:00:00+00:00")
    job_enqueue(name="dlq-alert", slot="2026-01-01T00:05:00+00:00")
    with jobs.temporarily(Job("always-fails", _fail, every=dt.timedelta(minutes=1))):
        job_run(name="always-fails", trigger="test")
        job_run(name="dlq-alert", trigger="test")
        after = scrape()
    assert after[("deskcomm_jobs_queue_messages", (("queue", "jobs"),))] == 2
    failed = series(after, "deskcomm_jobs_last_run_failed")
    assert failed[(("job", "always-fails"),)] == 1 and failed[(("job", "dlq-alert"),)] == 0
    assert failed[(("job", "backup"),)] == 0  # never run: not failed (no success time either)
    success = series(after, "deskcomm_jobs_last_success_timestamp_seconds")
    assert (("job", "dlq-alert"),) in success and (("job", "always-fails"),) not in success
    assert (("job", "backup"),) not in success


def _fail() -> int:
    raise RuntimeError("boom")


@pytest.fixture
def clean_jobs_queue(db: None) -> None:
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM dramatiq.queue")


@pytest.mark.django_db(transaction=True)
def test_an_emit_is_counted_when_it_commits_and_not_when_it_rolls_back(
    org: Organization,
) -> None:
    counted = "deskcomm_eventbus_events_emitted_total"
    before = scrape()
    with pytest.raises(RuntimeError), transaction.atomic():
        emit(org, "test.effect", 2)
        eventbus.emit_many(
            [{"event_type": "test.effect", "entity_kind": "t", "payload": {"n": 9}}],
            organization=org,
        )
        raise RuntimeError("the caller's transaction fails")
    assert delta(before, scrape(), counted, event_type="test.effect") == 0
    with transaction.atomic():
        emit(org, "test.effect", 2)
        assert delta(before, scrape(), counted, event_type="test.effect") == 0  # not yet
    eventbus.emit_many(  # autocommit: counted at once
        [{"event_type": "test.effect", "entity_kind": "t", "payload": {"n": 9}}], organization=org
    )
    assert delta(before, scrape(), counted, event_type="test.effect") == 3


@pytest.mark.django_db
def test_http_requests_are_counted_by_route() -> None:
    before = scrape()
    for _ in range(3):
        Client().get("/api/ping")
    after = scrape()
    name = "deskcomm_http_requests_total"
    assert delta(before, after, name, method="GET", route="api/ping", status="200") == 3


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("token", "header", "status"),
    [
        ("", "", 403),
        (TOKEN, "", 403),
        (TOKEN, "Bearer wrong", 403),
        (TOKEN, f"Bearer {TOKEN}", 200),
    ],
)
def test_the_endpoint_needs_the_token(token: str, header: str, status: int) -> None:
    with override_settings(METRICS_TOKEN=token, DEBUG=False):
        response = Client().get("/metrics", HTTP_AUTHORIZATION=header)
    assert response.status_code == status


@pytest.mark.django_db
def test_every_sql_statement_is_timed_by_alias() -> None:
    before = scrape()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(0.15)")
        with pytest.raises(DatabaseError), transaction.atomic():
            cursor.execute("SELECT 1/0")  # failed statements count too
    after = scrape()
    name = "deskcomm_db_query_duration_seconds"
    assert delta(before, after, f"{name}_count", alias="default") >= 2
    assert delta(before, after, f"{name}_sum", alias="default") >= 0.15
    # The slow one sits above the 100 ms bucket (seed 001 A11), the others below it.
    slow = delta(before, after, f"{name}_count") - delta(before, after, f"{name}_bucket", le="0.1")
    assert slow >= 1


@pytest.mark.django_db
def test_error_log_records_are_counted_by_top_level_logger() -> None:
    before = scrape()
    logging.getLogger("ai.responder").error("the model failed")
    logging.getLogger("somelibrary.internals").critical("broken")
    logging.getLogger("ai.responder").warning("not an error")
    after = scrape()
    name = "deskcomm_errors_logged_total"
    assert delta(before, after, name, logger="ai") == 1
    assert delta(before, after, name, logger="other") == 1  # never the raw logger name
    assert not any(("logger", "somelibrary") in keys for keys in series(after, name))


@pytest.mark.django_db
def test_the_rows_of_each_jobs_last_run_are_exported() -> None:
    with jobs.temporarily(Job("counts-seven", lambda: 7, every=dt.timedelta(minutes=1))):
        job_run(name="counts-seven", trigger="test")
        rows = series(scrape(), "deskcomm_jobs_last_run_rows")
    assert rows[(("job", "counts-seven"),)] == 7


def test_top_organizations_keeps_the_highest_and_combines_the_rest() -> None:
    values = {"a": 5.0, "b": 9.0, "c": 1.0, "d": 2.0}
    assert top_organizations(values, 2, sum) == {"b": 9.0, "a": 5.0, "other": 3.0}
    assert top_organizations(values, 2, max) == {"b": 9.0, "a": 5.0, "other": 2.0}
    assert top_organizations(values, 10, sum) == values


def test_an_empty_multiprocess_directory_writes_no_sample_files(tmp_path: Path) -> None:
    """`PROMETHEUS_MULTIPROC_DIR=` (empty, as .env.example and an install's .env have it) is
    unset: prometheus-client would otherwise write counter_<pid>.db files into the working
    directory of every process (they ended up committed once)."""
    code = (
        "import django; django.setup(); import core.metrics, eventbus.store.metrics; "
        "from prometheus_client import values; print(values.ValueClass.__name__)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=subprocess_env(PROMETHEUS_MULTIPROC_DIR=""),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "MutexValue"
    assert list(tmp_path.iterdir()) == []
