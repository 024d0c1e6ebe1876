"""Management commands: list_consumers, reap_events, drain_events argument handling."""

from __future__ import annotations

import datetime as dt
import json
import re
from importlib import import_module
from io import StringIO

import pytest
import time_machine
from django.core.management import CommandError, call_command
from django.utils import timezone

import eventbus
from core.models import Organization
from eventbus.dispatch import claim as claims
from eventbus.dispatch.loop_args import threads
from eventbus.store.models import Delivery, Route

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_list_consumers_shows_events_and_policy() -> None:
    text = run("list_consumers")
    assert "effect-a-worker" in text
    assert "events:       test.effect" in text
    assert "max_attempts: 8" in text
    rows = {row["name"]: row for row in json.loads(run("list_consumers", "--json"))}
    assert rows["flaky-worker"]["events"] == ["test.flaky"]
    assert rows["slow-effect-worker"]["handler"] == "tests.support.consumers.slow_effect"


def test_list_consumers_sync_rewrites_the_route_table() -> None:
    Route.objects.all().delete()
    run("list_consumers", "--sync")
    assert Route.objects.filter(event_type="test.effect").count() == 3


def test_reap_events_returns_expired_leases(org: Organization) -> None:
    start = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
    with time_machine.travel(start, tick=False) as clock:
        eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
        claims.claim(consumers=["effect-a-worker"], batch_size=5, worker_id="dead:1")
        assert "reaped 0 expired deliveries" in run("reap_events")
        clock.shift(dt.timedelta(minutes=6))
        assert "reaped 1 expired deliveries (0 dead)" in run("reap_events")
        delivery = Delivery.objects.get(consumer="effect-a-worker")
        assert (delivery.status, delivery.next_attempt_at) == ("pending", timezone.now())


def test_drain_events_rejects_an_unknown_consumer() -> None:
    with pytest.raises(CommandError, match="unknown consumer 'nope-worker'"):
        call_command("drain_events", "--consumer", "nope-worker", "--once")


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--batch-size", "0"], "must be at least 1"),
        (["--poll-interval", "-1"], "must be greater than 0"),
        (["--concurrency", "x"], "must be 'auto' or a whole number of at least 1, got 'x'"),
        (["--concurrency", "0"], "must be at least 1, got 0"),
    ],
)
def test_drain_events_rejects_bad_flags(args: list[str], why: str) -> None:
    with pytest.raises(CommandError, match=re.escape(why)):
        call_command("drain_events", *args)


def test_drain_events_threads_are_auto_unless_a_number_is_given() -> None:
    assert [threads(v) for v in ("auto", "AUTO", "1", "8")] == [None, None, 1, 8]
    parser = (
        import_module("eventbus.management.commands.drain_events")
        .Command()
        .create_parser("manage.py", "drain_events")
    )
    assert parser.parse_args([]).concurrency is None  # the default: auto
    assert parser.parse_args(["--concurrency", "4"]).concurrency == 4


def test_drain_events_runs_the_projects_checks_but_not_the_webs() -> None:
    """The worker's start-up checks (core.checks.worker_check_tags): a bad key still stops it;
    the URLconf is not imported (a URLconf that cannot be imported fails only the web's)."""
    from django.core.management.base import SystemCheckError
    from django.test.utils import override_settings

    from eventbus.management.commands.drain_events import Command

    with (
        override_settings(ENCRYPTION_KEYS={"webhook_secrets": ["not-a-key"]}),
        pytest.raises(SystemCheckError, match=r"deskcomm\.E003"),
    ):
        Command().check()  # what `manage.py drain_events` runs before it starts
    with override_settings(ROOT_URLCONF="tests.no_such_urlconf"):
        with pytest.raises(ImportError):
            call_command("check")
        Command().check()
