"""The workers page without a browser: human times with the exact one on hover, concurrency
split and explained, the version, and Quiet / Stop offered to platform operators only (refused,
audited, for anyone else). The real processes obeying them: test_worker_control_browser.py."""

from __future__ import annotations

import datetime as dt
import re

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from core.models import AuditLog, Organization, WorkerProcess
from tests.support.admin import staff

pytestmark = pytest.mark.django_db

PAGE = "/admin/ops/workers/"
VIEW = "core.view_workerprocess"
CONTROL = "core.change_workerprocess"
NOW = dt.datetime(2026, 3, 2, 12, 0, 0, tzinfo=dt.UTC)


def drain_row(**fields: object) -> WorkerProcess:
    values: dict[str, object] = {
        "id": "web-1:4242:a1b2c3",
        "kind": "drain_events",
        "host": "web-1",
        "pid": 4242,
        "version": "v2.4.1-3-gd7937ed",
        "pumps": "drain, relay",
        "concurrency": 3,
        "threads": {"drain": 2, "relay": 1},
        "started_at": NOW - dt.timedelta(hours=3, minutes=5),
        "heartbeat_at": NOW - dt.timedelta(seconds=64),
        "last_claim_at": NOW - dt.timedelta(seconds=5),
    }
    values.update(fields)
    return WorkerProcess.objects.create(**values)


def logged_in(
    *permissions: str, name: str = "ops", organizations: list[Organization] | None = None
) -> Client:
    client = Client()
    client.force_login(staff(name, *permissions, organizations=organizations))
    return client


def test_times_read_as_people_say_them_with_the_exact_time_on_hover() -> None:
    row = drain_row()
    with time_machine.travel(NOW, tick=False):
        page = logged_in(VIEW).get(PAGE).content.decode()
    assert "64 s ago" not in page
    assert '<time class="dc-when" datetime="2026-03-02T11:58:56+00:00" ' in page
    assert 'title="2026-03-02 11:58:56 UTC">1 min ago</time>' in page  # last heartbeat
    assert 'title="2026-03-02 08:55:00 UTC">3 h ago</time>' in page  # started
    assert ">5 s ago</time>" in page  # last claim
    assert f'title="version {row.version}"' in page and "unknown" not in page


def test_concurrency_is_split_by_part_and_explained() -> None:
    drain_row()
    page = logged_in(VIEW).get(PAGE).content.decode()
    cell = re.search(r'<td class="dc-concurrency">(.*?)</td>', page, re.S)
    assert cell and " ".join(re.sub("<[^>]+>", "", cell.group(1)).split()) == (
        "3 = drain 2 + relay 1"
    )
    assert "<b>drain</b>: handler threads (--concurrency)" in page
    assert "<b>relay</b>: outbox relay publisher" in page


def test_quiet_and_stop_are_offered_to_platform_operators_only(
    org: Organization,
) -> None:
    row = drain_row(heartbeat_at=timezone.now())
    quiet = f"{PAGE}{row.pk}/quiet/"
    viewer = logged_in(VIEW).get(PAGE).content.decode()
    assert 'name="quiet"' not in viewer and 'name="stop"' not in viewer

    scoped = logged_in(VIEW, CONTROL, name="scoped", organizations=[org])
    assert scoped.post(quiet).status_code == 403  # an organization's staff: never
    assert logged_in(VIEW, name="viewer").post(quiet).status_code == 403  # no change permission
    assert not AuditLog.objects.exists()

    operator = logged_in(VIEW, CONTROL, name="operator")
    page = operator.get(PAGE).content.decode()
    assert f'formaction="{quiet}"' in page and f'formaction="{PAGE}{row.pk}/stop/"' in page
    answer = operator.post(quiet, follow=True).content.decode()
    assert "Asked drain_events pid 4242 to quiet: it claims nothing more" in answer
    assert "quiet asked by user:operator just now" in answer
    row.refresh_from_db()
    assert (row.command, row.command_by) == ("quiet", "user:operator")
    [entry] = AuditLog.objects.all()
    assert (entry.action, entry.actor, entry.target_id) == ("worker.quiet", "user:operator", row.pk)
    again = operator.post(quiet, follow=True).content.decode()
    assert "asked to quiet (or stop) already" in again
    assert operator.get(f"{PAGE}{row.pk}/restart/").status_code == 404


def test_a_stale_or_non_bus_process_offers_no_control() -> None:
    drain_row(id="old:1:x", pid=1, heartbeat_at=timezone.now() - dt.timedelta(hours=1))
    drain_row(id="sched:2:y", pid=2, kind="run_scheduler", threads={}, heartbeat_at=timezone.now())
    operator = logged_in(VIEW, CONTROL, name="operator")
    page = operator.get(PAGE).content.decode()
    assert "formaction" not in page
    refused = operator.post(f"{PAGE}sched:2:y/stop/", follow=True).content.decode()
    assert "no such bus process" in refused
    assert WorkerProcess.objects.get(pk="sched:2:y").command == ""
