"""/metrics after a known workload: counters and queue gauges match; the token is required."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.conf import settings
from django.db import transaction
from django.test import Client
from django.test.utils import override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

import eventbus
from deskcomm.models import Organization
from eventbus.worker import Worker, WorkerOptions

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


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


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
    runs = "deskcomm_eventbus_handler_duration_seconds_count"
    assert delta(before, after, runs, consumer="effect-a-worker") == 3
    # Queue shape at scrape time (absolute values: this test owns the database).
    assert after[("deskcomm_eventbus_deliveries_pending", (("consumer", "effect-b-worker"),))] == 3
    assert after[("deskcomm_eventbus_deliveries_dead", (("consumer", "flaky-worker"),))] == 2
    assert ("deskcomm_eventbus_deliveries_pending", (("consumer", "effect-a-worker"),)) not in after
    lag = after[("deskcomm_eventbus_lag_seconds", (("consumer", "effect-c-worker"),))]
    assert lag == pytest.approx(90, abs=1)


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
