"""Replaying one consumer over a time window (eventbus.history.replays, `manage.py replay`): only
that consumer's deliveries of the window's events run again, flagged with the replay's id, never
twice for one id; the other consumers are untouched."""

from __future__ import annotations

import datetime as dt
import io
import uuid

import pytest
import time_machine
from django.core.management import CommandError, call_command

import eventbus
from core.models import AuditLog, Organization
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.history import replays
from eventbus.store.models import Delivery, EventLog
from tests.support.consumers import EFFECT_CONSUMERS
from tests.support.db import side_effect_rows

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 11, 30, 10, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)


def emit_at(org: Organization, when: dt.datetime, n: int) -> EventLog:
    with time_machine.travel(when, tick=False):
        return eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": n})


def drain_all() -> None:
    worker = Worker(WorkerOptions(consumers=list(EFFECT_CONSUMERS), listen=False))
    while worker.run_once():
        pass


def runs(consumer: str) -> dict[str, int]:
    return {event: n for event, name, n in side_effect_rows() if name == consumer}


@pytest.fixture
def history(org: Organization, org_b: Organization, side_effects: None) -> list[EventLog]:
    """Five events an hour apart (10:00 .. 14:00), one of them (12:00) another tenant's, all
    handled once by the three consumers."""
    events = [emit_at(org_b if i == 2 else org, T0 + i * HOUR, i) for i in range(5)]
    drain_all()
    assert set(Delivery.objects.values_list("status", flat=True)) == {"done"}
    return events


def test_only_the_consumer_and_the_window_run_again(
    history: list[EventLog], org: Organization
) -> None:
    window = replays.window(
        consumer="effect-a-worker", since=T0 + HOUR, until=T0 + 4 * HOUR
    )  # 11:00, 12:00 (org_b), 13:00
    report = replays.replay(window, actor="user:ops", reason="bug fixed in effect-a")
    assert (report.matched, report.queued, report.left) == (3, 3, 0)
    replayed = Delivery.objects.filter(replay_id=report.replay_id)
    assert {(d.consumer, d.event_id) for d in replayed} == {
        ("effect-a-worker", e.pk) for e in history[1:4]
    }
    assert {d.status for d in replayed} == {"pending"}
    assert Delivery.objects.filter(status="done").count() == 15 - 3  # everything else untouched
    drain_all()
    assert runs("effect-a-worker") == {str(e.pk): 2 if e in history[1:4] else 1 for e in history}
    assert set(runs("effect-b-worker").values()) == set(runs("effect-c-worker").values()) == {1}
    assert set(EventLog.objects.values_list("status", flat=True)) == {"done"}
    [entry] = AuditLog.objects.filter(action="consumer.replay")
    assert (entry.actor, entry.target_id, entry.reason) == (
        "user:ops",
        "effect-a-worker",
        "bug fixed in effect-a",
    )
    assert entry.details["queued"] == 3 and entry.details["replay_id"] == str(report.replay_id)


def test_the_same_replay_id_never_queues_a_delivery_twice(history: list[EventLog]) -> None:
    window = replays.window(consumer="effect-a-worker", since=T0, until=T0 + 5 * HOUR)
    first = replays.replay(window, actor="user:ops", reason="replay")
    drain_all()
    again = replays.replay(window, actor="user:ops", reason="continue", replay_id=first.replay_id)
    assert (again.matched, again.queued) == (5, 0)
    other = replays.replay(window, actor="user:ops", reason="once more")
    assert other.queued == 5 and other.replay_id != first.replay_id


def test_a_replay_cut_off_half_way_is_continued_by_its_id(history: list[EventLog]) -> None:
    window = replays.window(consumer="effect-a-worker", since=T0, until=T0 + 5 * HOUR)
    replay_id = uuid.uuid4()
    seen: list[int] = []

    def cut_off(report: replays.ReplayReport) -> None:
        seen.append(report.queued)
        if report.queued >= 2:
            raise KeyboardInterrupt  # the operator's Ctrl-C after the first chunk

    with pytest.raises(KeyboardInterrupt):
        replays.replay(
            window, actor="user:ops", reason="r", replay_id=replay_id, chunk=2, progress=cut_off
        )
    assert Delivery.objects.filter(replay_id=replay_id).count() == 2  # the committed chunk
    rest = replays.replay(window, actor="user:ops", reason="r", replay_id=replay_id, chunk=2)
    assert (rest.matched, rest.queued) == (5, 3)
    assert Delivery.objects.filter(replay_id=replay_id, status="pending").count() == 5


def test_an_organization_and_a_missing_delivery(history: list[EventLog], org: Organization) -> None:
    """Events the consumer had no delivery of (it subscribed later) get one."""
    Delivery.objects.filter(event=history[0], consumer="effect-a-worker").delete()
    window = replays.window(
        consumer="effect-a-worker", since=T0, until=T0 + 5 * HOUR, organization_id=org.pk
    )
    dry = replays.replay(window, actor="user:ops", reason="check", dry_run=True)
    assert (dry.matched, dry.by_status) == (4, {"none": 1, "done": 3})
    assert not Delivery.objects.filter(status="pending").exists()  # a dry run changes nothing
    report = replays.replay(window, actor="user:ops", reason="backfill")
    assert (report.matched, report.queued) == (4, 4)
    created = Delivery.objects.get(event=history[0], consumer="effect-a-worker")
    assert (created.status, created.replay_id) == ("pending", report.replay_id)
    assert not Delivery.objects.filter(event=history[2], status="pending").exists()  # org_b


def test_pending_and_running_deliveries_are_left_alone(org: Organization) -> None:
    event = emit_at(org, T0, 0)
    window = replays.window(consumer="effect-a-worker", since=T0, until=T0 + HOUR)
    report = replays.replay(window, actor="user:ops", reason="r")
    assert (report.matched, report.queued, report.left) == (1, 0, 1)
    assert Delivery.objects.get(event=event, consumer="effect-a-worker").replay_id is None
    assert not AuditLog.objects.filter(action="consumer.replay").exists()  # nothing was done


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"consumer": "nobody"}, "no registered consumer named 'nobody'"),
        ({"event_type": "lead.created"}, "does not consume 'lead.created'"),
        ({"until": T0 - HOUR}, "must be before until"),
        ({"since": dt.datetime(2026, 11, 30, 10, 0)}, "needs a time zone"),
    ],
)
def test_bad_windows_are_refused_with_a_reason(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"consumer": "effect-a-worker", "since": T0, **kwargs}
    with pytest.raises(replays.ReplayError, match=message):
        replays.window(**args)  # type: ignore[arg-type]


def test_the_command_replays_dry_runs_and_explains_mistakes(
    history: list[EventLog], org: Organization
) -> None:
    out, err = io.StringIO(), io.StringIO()
    args = ["--consumer", "effect-a-worker", "--since", "2026-11-30T07:00:00-03:00"]
    call_command("replay", *args, "--until", "2026-11-30T09:00-03:00", "--dry-run", stdout=out)
    assert "dry run: 2 events of test.effect" in out.getvalue() and "2 done" in out.getvalue()
    assert not Delivery.objects.filter(status="pending").exists()
    call_command(
        "replay", *args, "--organization", "acme", "--reason", "fix", stdout=out, stderr=err
    )
    assert "4 deliveries of effect-a-worker queued" in out.getvalue()
    assert "4 events read, 4 queued" in err.getvalue()
    with pytest.raises(CommandError, match="ISO 8601"):
        call_command("replay", "--consumer", "effect-a-worker", "--since", "yesterday")
    with pytest.raises(CommandError, match="no organization with the slug or id 'nope'"):
        call_command("replay", *args, "--organization", "nope")
    with pytest.raises(CommandError, match="--replay-id must be a UUID"):
        call_command("replay", *args, "--replay-id", "x")
