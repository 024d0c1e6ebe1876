"""Eight `drain_events` processes on one server: fair claiming across organizations, fencing
(no delivery handled twice, a lease token taken away is honoured) and bounded connections."""

from __future__ import annotations

import statistics
import threading
import uuid

import pytest
from django.db import connection

import eventbus
from core.models import Organization
from eventbus.store.models import Delivery
from tests.support.consumers import EFFECT_CONSUMERS
from tests.support.db import raw_connection, side_effect_rows
from tests.support.processes import Drain, start_drain
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

DRAINS = 8
EFFECT_ARGS = [arg for name in EFFECT_CONSUMERS for arg in ("--consumer", name)]
BIG, SMALL = 1000, 100
# Per drain process at --concurrency 1 (docs/configuration.md "Connections per process"): the main
# thread's Django connection (claims, acks), the handler thread's, the heartbeat thread's (lease
# renewals and the worker registry's beat) and the LISTEN connection.
CONNECTIONS_PER_DRAIN = 4

# Another owner's token and lease (long enough that no reaper takes the rows back meanwhile).
# The outer status test matters: a row its owner acks between the subquery's snapshot and the
# UPDATE's row lock is re-checked against its new version, and a done row is left alone.
STEAL_SQL = """
UPDATE eventbus_delivery SET lease_token = %(token)s, locked_until = now() + interval '1 hour'
 WHERE id IN (SELECT id FROM eventbus_delivery WHERE status = 'processing' LIMIT 5)
   AND status = 'processing'
RETURNING id
"""
BACKENDS_SQL = """
SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND backend_type = 'client backend'
   AND pid <> pg_backend_pid()
"""


def emit(org: Organization, n: int) -> None:
    eventbus.emit_many(
        [
            {"event_type": "test.effect", "entity_kind": "thing", "payload": {"n": i}}
            for i in range(n)
        ],
        organization=org,
    )


class Watcher(threading.Thread):
    """While the drains run, from a connection of its own: takes some processing deliveries'
    leases away (another token and lease, as if another worker now owned them) and samples how
    many connections the server has."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.token = uuid.uuid4()
        self.stolen: set[uuid.UUID] = set()
        self.backends: list[int] = []
        self.done = threading.Event()

    def run(self) -> None:
        with raw_connection() as conn:
            while not self.done.wait(0.02):
                self.backends.append(int(conn.execute(BACKENDS_SQL).fetchone()[0]))  # type: ignore[index]
                if len(self.stolen) < 10:
                    rows = conn.execute(STEAL_SQL, {"token": self.token}).fetchall()
                    self.stolen.update(row[0] for row in rows)


def test_eight_drains_claim_fairly_fence_their_acks_and_bound_their_connections(
    org: Organization, side_effects: None, processes: list[Drain]
) -> None:
    small = [Organization.objects.create(name=f"Small {i}", slug=f"small-{i}") for i in (1, 2)]
    emit(org, BIG)  # the big backlog first: the small tenants' events are behind it
    for other in small:
        emit(other, SMALL)
    watcher = Watcher()
    watcher.start()
    wait_for(lambda: bool(watcher.backends), timeout=10, what="the watcher's first sample")
    try:
        processes.extend(
            start_drain("--once", "--batch-size", "25", "--concurrency", "1", *EFFECT_ARGS)
            for _ in range(DRAINS)
        )
        for process in processes:
            assert process.wait(timeout=300) == 0, process.output()
    finally:
        watcher.done.set()
        watcher.join(timeout=10)

    # Fencing: a delivery whose lease was taken away was never acked by its old owner ...
    assert watcher.stolen, "no delivery was caught processing"
    stolen = Delivery.objects.filter(pk__in=watcher.stolen)
    assert set(stolen.values_list("status", "lease_token")) == {("processing", watcher.token)}
    # ... and every other one was handled exactly once, by one of the eight, and acked once.
    rows = side_effect_rows()
    assert {runs for _, _, runs in rows} == {1}
    assert len(rows) >= (BIG + 2 * SMALL) * len(EFFECT_CONSUMERS) - len(watcher.stolen)
    settled = Delivery.objects.exclude(pk__in=watcher.stolen)
    assert set(settled.values_list("status", "attempts")) == {("done", 1)}
    assert len(distinct_pids()) > 1  # the work really was shared between processes

    # Fair claiming: the small tenants were served while the big backlog was still under way.
    big_done = sorted(finished_at(org))
    small_done = max(max(finished_at(other)) for other in small)
    assert small_done < statistics.median(big_done)

    # Bounded connections: never more than the documented count per process (the first sample,
    # before any drain started, is this test's own connection).
    assert max(watcher.backends) - watcher.backends[0] <= DRAINS * CONNECTIONS_PER_DRAIN


def finished_at(org: Organization) -> list[float]:
    done = Delivery.objects.filter(organization=org, status="done")
    return [at.timestamp() for at in done.values_list("finished_at", flat=True) if at]


def distinct_pids() -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT pid FROM test_side_effect")
        return {row[0] for row in cursor.fetchall()}
