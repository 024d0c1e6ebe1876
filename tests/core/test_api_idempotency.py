"""Idempotency-Key on POST /api/v1/events: replay, conflict, expiry, failures, concurrency."""

from __future__ import annotations

import datetime as dt
import io
import threading
import time
import uuid
from typing import Any

import pytest
import time_machine
from django.core.management import call_command
from django.db import connection, connections

from core.api import idempotency
from core.models import IdempotencyKey, Organization
from eventbus.store.models import EventLog
from tests.support.api import client_for, error_of, issue_key, lead_stage_changed
from tests.support.db import raw_connection

EVENTS = "/api/v1/events"
T0 = dt.datetime(2026, 6, 1, 9, 0, tzinfo=dt.UTC)


def post(token: str, body: dict[str, Any], key: str) -> Any:
    return client_for(token, HTTP_IDEMPOTENCY_KEY=key).post(EVENTS, body, format="json")


@pytest.mark.django_db
def test_same_key_same_body_replays_the_first_response(org: Organization) -> None:
    token = issue_key(org)
    first = post(token, lead_stage_changed(), "order-1")
    assert first.status_code == 201
    assert "Idempotent-Replayed" not in first
    # Same body with other key order and spacing: still the same request.
    again = client_for(token, HTTP_IDEMPOTENCY_KEY="order-1").post(
        EVENTS,
        '{"payload": {"to_stage_id": "qualified", "from_stage_id": "new"},'
        ' "entity_kind": "lead", "event_type": "lead.stage_changed"}',
        content_type="application/json",
    )
    assert again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert EventLog.objects.count() == 1


@pytest.mark.django_db
def test_same_key_other_body_is_a_409_and_writes_nothing(org: Organization) -> None:
    token = issue_key(org)
    assert post(token, lead_stage_changed(), "order-2").status_code == 201
    other = lead_stage_changed(payload={"from_stage_id": "new", "to_stage_id": "lost"})
    error = error_of(post(token, other, "order-2"), 409, "idempotency_conflict")
    assert "different request body" in error["message"]
    assert EventLog.objects.count() == 1


@pytest.mark.django_db
def test_a_failed_request_does_not_burn_the_key(org: Organization) -> None:
    token = issue_key(org)
    bad = lead_stage_changed(payload={})
    error_of(post(token, bad, "order-3"), 400, "validation_error")
    assert not IdempotencyKey.objects.exists()
    assert post(token, lead_stage_changed(), "order-3").status_code == 201


@pytest.mark.django_db
def test_after_the_ttl_the_key_runs_again_and_purge_removes_old_keys(org: Organization) -> None:
    token = issue_key(org)
    with time_machine.travel(T0, tick=False) as clock:
        first = post(token, lead_stage_changed(), "order-4").json()
        clock.shift(dt.timedelta(hours=23, minutes=59))
        assert post(token, lead_stage_changed(), "order-4").json()["id"] == first["id"]
        clock.shift(dt.timedelta(minutes=1))
        later = post(token, lead_stage_changed(), "order-4")
        assert later.status_code == 201
        assert "Idempotent-Replayed" not in later
        assert later.json()["id"] != first["id"]
        post(token, lead_stage_changed(), "order-5")
        clock.shift(dt.timedelta(hours=25))
        post(token, lead_stage_changed(), "order-6")
        call_command("purge_idempotency_keys", stdout=io.StringIO())
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["order-6"]


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["", " spaced key", "x" * 256, "naïve"])
def test_malformed_keys_are_a_400_on_the_header(org: Organization, key: str) -> None:
    error = error_of(post(issue_key(org), lead_stage_changed(), key), 400, "validation_error")
    assert list(error["fields"]) == ["Idempotency-Key"]
    assert not EventLog.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_duplicates_run_the_work_once(org: Organization) -> None:
    """A holds the key's row (work in progress); B's claim waits on it, then replays A's result."""
    started, release = threading.Event(), threading.Event()
    runs: list[str] = []
    outcomes: dict[str, idempotency.Outcome] = {}

    def work(name: str) -> tuple[int, Any]:
        runs.append(name)
        started.set()
        assert release.wait(10)
        return 201, {"by": name}

    def request(name: str) -> None:
        try:
            outcomes[name] = idempotency.run_once(
                organization_id=org.pk,
                scope="test.op",
                key="dup-1",
                request_hash="h",
                work=lambda: work(name),
            )
        finally:
            connections.close_all()

    a = threading.Thread(target=request, args=("a",))
    a.start()
    assert started.wait(10)
    b = threading.Thread(target=request, args=("b",))
    b.start()
    wait_until_a_backend_waits_on_a_lock()
    release.set()
    a.join(10)
    b.join(10)
    assert runs == ["a"]
    assert outcomes["a"] == idempotency.Outcome(201, {"by": "a"}, replayed=False)
    assert outcomes["b"] == idempotency.Outcome(201, {"by": "a"}, replayed=True)
    assert IdempotencyKey.objects.count() == 1


def wait_until_a_backend_waits_on_a_lock(deadline_s: float = 10.0) -> None:
    """Poll pg_stat_activity (from a separate connection) until B is blocked on A's row."""
    with raw_connection() as conn:
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            ).fetchone()
            if row and row[0] > 0:
                return
            time.sleep(0.01)  # polling a condition, with a deadline
    raise AssertionError("the duplicate request never waited on the first one's row")


@pytest.mark.django_db
def test_replay_survives_work_that_returns_non_string_values(org: Organization) -> None:
    outcome = idempotency.run_once(
        organization_id=org.pk,
        scope="test.op",
        key="typed",
        request_hash="h",
        work=lambda: (201, {"id": uuid.UUID(int=1), "at": T0}),
    )
    assert not outcome.replayed
    replay = idempotency.run_once(
        organization_id=org.pk, scope="test.op", key="typed", request_hash="h", work=lambda: (0, {})
    )
    assert replay.body == {"id": str(uuid.UUID(int=1)), "at": "2026-06-01T09:00:00Z"}
    assert connection.in_atomic_block  # the test transaction is still usable
