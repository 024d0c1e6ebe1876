"""The per-minute rollup: written by the settle statements, read by charts, breakers and metrics."""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Iterator

import pytest
import time_machine
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext, override_settings

import eventbus
from core.metrics import exposition
from core.models import Organization
from eventbus.dispatch import claim as claims
from eventbus.dispatch.retry import Verdict
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.history import rollup
from eventbus.store.models import Delivery, Rollup
from tests.support.consumers import EFFECT_CONSUMERS

T0 = dt.datetime(2026, 11, 2, 12, 0, 30, tzinfo=dt.UTC)
MINUTE = dt.datetime(2026, 11, 2, 12, 0, tzinfo=dt.UTC)


def emit(org: Organization, n: int, event_type: str = "test.effect") -> None:
    eventbus.emit_many(
        [{"event_type": event_type, "entity_kind": "t", "payload": {"n": i}} for i in range(n)],
        organization=org,
    )


def rows() -> dict[tuple[str, uuid.UUID], tuple[int, int, int]]:
    """The counts per (consumer, organization), summed over the connections' shards."""
    counts: dict[tuple[str, uuid.UUID], tuple[int, int, int]] = {}
    for r in Rollup.objects.all():
        done, failed, dead = counts.get((r.consumer, r.organization_id), (0, 0, 0))
        counts[(r.consumer, r.organization_id)] = (done + r.done, failed + r.failed, dead + r.dead)
    return counts


def fail(token: uuid.UUID, ids: list[int], *, dead: bool, now: dt.datetime | None = T0) -> None:
    verdict = Verdict(dead=dead, delay=30, error="ValueError: no", error_class="ValueError")
    claims.nack(token, [claims.Failure(i, verdict) for i in ids], now=now)


@pytest.fixture
def at_t0() -> Iterator[None]:
    with time_machine.travel(T0, tick=False):
        yield


@pytest.mark.django_db
@pytest.mark.usefixtures("at_t0")
def test_a_settled_batch_writes_the_rollup_inside_its_own_statements(
    org: Organization, org_b: Organization, side_effects: None
) -> None:
    emit(org, 30)
    emit(org_b, 20)
    worker = Worker(WorkerOptions(batch_size=200, listen=False))
    with CaptureQueriesContext(connection) as queries:
        assert worker.drain.run_batch() == 150
    # (The handlers' own statements aside: their inserts, and entering their tenants.)
    bus = [
        q["sql"]
        for q in queries
        if "test_side_effect" not in q["sql"] and "set_config('app." not in q["sql"]
    ]
    # No statement added: the ack's own upsert (one per settle statement) counts the batch.
    assert [q.splitlines()[0] for q in bus] == [
        "-- name: isolated_due",
        "-- name: claim_ordered",  # every consumer: the ordered ones too
        "-- name: ack",
    ]
    assert bus[-1].count("INSERT INTO eventbus_rollup") == 1
    assert rows() == {
        **{(c, org.pk): (30, 0, 0) for c in EFFECT_CONSUMERS},
        **{(c, org_b.pk): (20, 0, 0) for c in EFFECT_CONSUMERS},
    }
    assert set(Rollup.objects.values_list("bucket_start", flat=True)) == {MINUTE}


@pytest.mark.django_db
@pytest.mark.usefixtures("at_t0")
def test_failures_count_as_failed_or_dead_and_a_lost_lease_counts_nothing(
    org: Organization,
) -> None:
    emit(org, 6)
    batch = claims.claim(consumers=["effect-a-worker"], batch_size=6, worker_id="w", now=T0)
    ids = batch.ids
    fail(batch.token, ids[:2], dead=False)
    fail(batch.token, ids[2:3], dead=True)
    claims.ack(batch.token, ids[3:], now=T0)
    claims.ack(batch.token, ids[3:], now=T0)  # again: nothing is still this claim's
    claims.ack(uuid.uuid4(), ids, now=T0)  # a stale token changes nothing
    assert rows() == {("effect-a-worker", org.pk): (3, 2, 1)}
    outcome = rollup.outcomes("effect-a-worker", dt.timedelta(minutes=5), now=T0)
    assert (outcome.attempts, outcome.failure_rate) == (6, pytest.approx(3 / 6))
    assert rollup.failure_rate("effect-a-worker", dt.timedelta(minutes=5), now=T0) == 0.5
    assert rollup.failure_rate("effect-b-worker", dt.timedelta(minutes=5), now=T0) is None
    later = T0 + dt.timedelta(minutes=10)
    assert rollup.failure_rate("effect-a-worker", dt.timedelta(minutes=5), now=later) is None


@pytest.mark.django_db(transaction=True)
def test_two_workers_settling_at_once_add_up(org: Organization) -> None:
    """Eight threads claim and ack batches of one consumer and tenant at once: every ack adds
    its own count (a row per connection), none is lost."""
    emit(org, 400)
    barrier = threading.Barrier(8)
    acked: list[int] = []
    lock = threading.Lock()

    def settler() -> None:
        try:
            batch = claims.claim(consumers=["effect-a-worker"], batch_size=50, worker_id="w")
            barrier.wait()
            n = claims.ack(batch.token, batch.ids, now=T0)
            with lock:
                acked.append(n)
        finally:
            connection.close()

    threads = [threading.Thread(target=settler) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sum(acked) == 400
    assert rows() == {("effect-a-worker", org.pk): (400, 0, 0)}


@pytest.mark.django_db(transaction=True)
def test_an_open_settle_transaction_does_not_hold_back_another_connections_settle(
    org: Organization,
) -> None:
    """One connection acks in a transaction it keeps open (as an atomic consumer's ack does
    until its handler's work commits); another connection's ack of the same consumer, tenant
    and minute must not wait for it: each connection writes its own rollup row."""
    emit(org, 20)
    first = claims.claim(consumers=["effect-a-worker"], batch_size=10, worker_id="a")
    second = claims.claim(consumers=["effect-a-worker"], batch_size=10, worker_id="b")
    assert len(first.ids) == len(second.ids) == 10
    acked_in_open_transaction = threading.Event()
    finish = threading.Event()
    errors: list[BaseException] = []

    def holder() -> None:
        try:
            with transaction.atomic():
                claims.ack(first.token, first.ids)
                acked_in_open_transaction.set()
                assert finish.wait(timeout=60)
        except BaseException as error:  # reported by the test below
            errors.append(error)
            acked_in_open_transaction.set()
        finally:
            connection.close()

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert acked_in_open_transaction.wait(timeout=60)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL lock_timeout = '5s'")  # a wait would fail, not hang
            assert claims.ack(second.token, second.ids) == 10
    finally:
        finish.set()
        thread.join(timeout=60)
    assert errors == []
    assert rows() == {("effect-a-worker", org.pk): (20, 0, 0)}
    assert Rollup.objects.count() == 2  # one row per connection


@pytest.mark.django_db
@pytest.mark.usefixtures("at_t0")
def test_series_fills_empty_steps_and_aligns_fifteen_minutes(org: Organization) -> None:
    emit(org, 4)
    batch = claims.claim(consumers=["effect-a-worker"], batch_size=4, worker_id="w", now=T0)
    claims.ack(batch.token, batch.ids[:3], now=T0 - dt.timedelta(minutes=20))
    fail(batch.token, batch.ids[3:], dead=True)
    hour = rollup.series(window=dt.timedelta(hours=1), step=rollup.MINUTE, now=T0)
    assert len(hour) == 60 and hour[-1].start == MINUTE
    assert [(b.start, b.done, b.dead) for b in hour if b.done or b.dead] == [
        (MINUTE - dt.timedelta(minutes=20), 3, 0),
        (MINUTE, 0, 1),
    ]
    quarter = dt.timedelta(minutes=15)
    day = rollup.series(window=dt.timedelta(hours=24), step=quarter, now=T0)
    assert len(day) == 96 and day[-1].start == MINUTE  # 12:00 starts a quarter
    assert [(b.done, b.dead) for b in day[-3:]] == [(3, 0), (0, 0), (0, 1)]  # 11:40 is in 11:30
    other = rollup.series(
        window=dt.timedelta(hours=1), step=rollup.MINUTE, now=T0, consumer="effect-b-worker"
    )
    assert not any(b.done for b in other)
    mine = rollup.series(
        window=dt.timedelta(hours=1), step=rollup.MINUTE, now=T0, organization_id=org.pk
    )
    assert sum(b.done for b in mine) == 3


@pytest.mark.django_db
def test_lag_is_sampled_per_pair_from_the_oldest_due_delivery(
    org: Organization, org_b: Organization
) -> None:
    with time_machine.travel(T0 - dt.timedelta(seconds=90), tick=False):
        emit(org, 2)
    with time_machine.travel(T0, tick=False):
        emit(org_b, 1)
    Delivery.objects.filter(organization=org_b, consumer="effect-c-worker").update(
        next_attempt_at=T0 + dt.timedelta(minutes=5)  # scheduled later: no lag
    )
    assert rollup.sample_lag(now=T0) == 6  # (2 organizations x 3 consumers)
    assert rollup.sample_lag(now=T0 - dt.timedelta(seconds=10)) == 6  # same minute: the worse
    lags = {(r.consumer, r.organization_id): r.lag_seconds for r in Rollup.objects.all()}
    assert lags[("effect-a-worker", org.pk)] == pytest.approx(90)
    assert lags[("effect-a-worker", org_b.pk)] == pytest.approx(0)
    assert lags[("effect-c-worker", org_b.pk)] == 0
    [bucket] = [
        b
        for b in rollup.series(window=dt.timedelta(hours=1), step=rollup.MINUTE, now=T0)
        if b.lag_seconds is not None
    ]
    assert bucket.lag_seconds == pytest.approx(90)


@pytest.mark.django_db
def test_purge_keeps_eight_days(org: Organization) -> None:
    for days in (0, 7, 9):
        Rollup.objects.create(
            bucket_start=MINUTE - dt.timedelta(days=days),
            consumer="c",
            organization_id=org.pk,
            done=1,
        )
    assert rollup.purge(now=T0) == 1
    assert Rollup.objects.count() == 2


@pytest.fixture
def busy_tenants(db: None) -> Iterator[list[Organization]]:
    """Four organizations, the first the busiest; the last has only dead letters."""
    orgs = [Organization.objects.create(name=f"T{i}", slug=f"t{i}") for i in range(4)]
    now = dt.datetime.now(dt.UTC)
    for volume, org in zip((40, 30, 20), orgs, strict=False):
        Rollup.objects.create(
            bucket_start=rollup.floor(now, rollup.MINUTE),
            consumer="c",
            organization_id=org.pk,
            done=volume - 4,
            failed=3,
            dead=1,
            lag_seconds=volume,
        )
    emit(orgs[3], 2)
    batch = claims.claim(consumers=["effect-a-worker"], batch_size=2, worker_id="w")
    fail(batch.token, batch.ids, dead=True, now=None)
    yield orgs


def test_tenant_figures_keep_the_busiest_and_sum_the_rest(busy_tenants: list[Organization]) -> None:
    tenants = {t.label: t for t in rollup.tenant_figures(top=2)}
    assert list(tenants) == ["t0", "t1", "other"]
    assert (tenants["t0"].volume, tenants["t0"].fail_ratio) == (40, pytest.approx(4 / 40))
    other = tenants["other"]  # t2 (settled 20) and t3 (2 dead letters, settled nothing in rollup)
    assert (other.volume, other.dead, other.lag_seconds) == (22, 2, 20)
    assert other.fail_ratio == pytest.approx((4 + 2) / 22)


def test_metrics_expose_per_tenant_gauges_with_an_other_bucket(
    busy_tenants: list[Organization],
) -> None:
    with override_settings(EVENTBUS={"METRICS_TOP_ORGANIZATIONS": 1}):
        text = exposition().decode()
    assert 'deskcomm_eventbus_organization_lag_seconds{organization="t0"} 40.0' in text
    assert 'deskcomm_eventbus_organization_lag_seconds{organization="other"} 30.0' in text
    assert 'deskcomm_eventbus_organization_dead_deliveries{organization="other"} 2.0' in text
    assert 'deskcomm_eventbus_organization_fail_ratio{organization="t0"} 0.1' in text
    assert 'organization="t1"' not in text and 'organization="t2"' not in text


@pytest.mark.django_db
def test_final_steps_are_read_once_and_the_newest_every_time(org: Organization) -> None:
    def add(minutes_ago: int, done: int) -> None:
        Rollup.objects.create(
            bucket_start=MINUTE - dt.timedelta(minutes=minutes_ago),
            consumer="c",
            organization_id=org.pk,
            done=done,
        )

    add(30, 5)
    hour = dt.timedelta(hours=1)
    first = rollup.series(window=hour, step=rollup.MINUTE, now=T0)
    add(20, 7)  # into a final minute (written behind the cache's back; settles never do)
    add(0, 3)  # the current minute
    with CaptureQueriesContext(connection) as queries:
        again = rollup.series(window=hour, step=rollup.MINUTE, now=T0)
    [query] = [q["sql"] for q in queries]
    assert "2026-11-02 11:58" in query  # only the steps that were not final yet are read
    assert [b.done for b in first if b.done] == [5]
    assert [b.done for b in again if b.done] == [5, 3]
