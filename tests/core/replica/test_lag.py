"""The lag guard: a replica too far behind (or unreachable, or not a standby) is not used, with
a log line and never an error page; an idle primary's caught-up replica is used."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from prometheus_client import REGISTRY

import eventbus
from core.replica.lag import guard, measure
from tests.support.api import api_client
from tests.support.factories import OrganizationFactory
from tests.support.streaming import HOST, StreamingPair, free_ports, serving
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)  # see test_routing.py

EVENTS = "/api/v1/events"
LOGGER = "core.replica.lag"


def served_by(outcome: str) -> float:
    sample = REGISTRY.get_sample_value("deskcomm_db_replica_requests_total", {"served_by": outcome})
    return sample or 0.0


def listed(client: Any) -> set[str]:
    response = client.get(EVENTS)
    assert response.status_code == 200, response.content[:500]
    return {item["id"] for item in response.json()["results"]}


def emitted(client: Any) -> str:
    event = eventbus.emit(
        "test.effect", organization=client.organization, entity_kind="thing", payload={"n": 1}
    )
    return str(event.id)


@pytest.fixture
def api(replicated: StreamingPair) -> Any:
    org = OrganizationFactory()
    api = api_client(org, "events:read")
    api.organization = org
    return api


def test_a_lagging_replica_sends_reads_back_to_the_primary(
    replicated: StreamingPair, api: Any, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    replicated.wait_caught_up()
    replicated.pause_replay()
    new = emitted(api)
    assert new not in listed(api)  # within the (generous) limit: the replica serves
    settings.DATABASE_REPLICA = {"MAX_LAG": 1.0, "CHECK_INTERVAL": 0.0}
    # The paused standby falls behind in real time; once past a second, the primary answers.
    fallbacks = served_by("fallback")
    wait_for(lambda: new in listed(api), timeout=30, what="reads to fall back to the primary")
    assert served_by("fallback") > fallbacks
    assert any(
        record.levelno == logging.WARNING and "DATABASE_REPLICA_MAX_LAG=1" in record.getMessage()
        for record in caplog.records
    ), caplog.text
    replicated.resume_replay()
    caplog.clear()
    assert new in listed(api)
    assert "read replica in use" in caplog.text


def test_an_idle_primary_does_not_make_a_caught_up_replica_look_late(
    replicated: StreamingPair, settings: Any
) -> None:
    settings.DATABASE_REPLICA = {"MAX_LAG": 1.0}
    replicated.wait_caught_up()
    age = "SELECT EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())"
    # Nothing is written: the last replayed commit only grows older than the limit.
    wait_for(lambda: replicated.replica.sql(age) > 1.5, timeout=30, what="an old replay")
    verdict = measure()
    assert verdict.usable and verdict.lag == 0.0, verdict


def test_an_unreachable_replica_is_a_warning_not_an_error_page(
    streaming_pair: StreamingPair,
    django_db_blocker: Any,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings.DATABASE_REPLICA = {"CHECK_INTERVAL": 0.0}
    [closed] = free_ports(1)
    template = streaming_pair.replica.django_settings({"OPTIONS": {"connect_timeout": 2}})
    nowhere = {**template, "ENGINE": "django.db.backends.postgresql", "HOST": HOST}
    nowhere["PORT"] = str(closed)
    with django_db_blocker.unblock(), serving(streaming_pair, replica=nowhere):
        org = OrganizationFactory()
        api = api_client(org, "events:read")
        api.organization = org
        new = emitted(api)
        assert new in listed(api)  # the primary answered
    assert any(
        record.levelno == logging.WARNING and "unreachable" in record.getMessage()
        for record in caplog.records
    ), caplog.text


def test_a_replica_that_is_not_a_standby_is_not_used(
    streaming_pair: StreamingPair, django_db_blocker: Any
) -> None:
    primary_again = streaming_pair.primary.django_settings(
        {"ENGINE": "django.db.backends.postgresql", "OPTIONS": {}}
    )
    with django_db_blocker.unblock(), serving(streaming_pair, replica=primary_again):
        verdict = measure()
        assert not guard.usable()
    assert not verdict.usable and "not a standby" in verdict.reason


def test_a_replica_failing_under_a_request_sends_it_to_the_primary(
    replicated: StreamingPair, api: Any, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.DATABASE_REPLICA = {"MAX_LAG": 60.0, "CHECK_INTERVAL": 3600.0}
    replicated.wait_caught_up()
    replicated.pause_replay()
    new = emitted(api)
    assert new not in listed(api)  # the replica; its verdict is now trusted for an hour
    replicated.replica.stop()
    try:
        assert guard.usable()  # not measured again within the interval...
        assert new in listed(api)  # ...but the request its failure hit ran again on the primary
        assert not guard.usable()
        assert "read replica not used, reads go to the primary: a query failed" in caplog.text
    finally:
        replicated.start_replica()
