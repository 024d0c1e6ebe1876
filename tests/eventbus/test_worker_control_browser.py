"""Quiet and Stop from the workers page in a real browser (headless Chromium, 1280x800), obeyed
by real `drain_events` subprocesses within their heartbeat: the quieted one claims nothing more
while the other drains the work; the stopped one finishes and exits 0, as on SIGTERM. One
browser session for the module; screenshots go to test-artifacts/admin/."""

from __future__ import annotations

import re
from typing import Any

import pytest

import eventbus
from core.models import AuditLog, Organization, WorkerProcess
from eventbus.store.models import Delivery
from tests.support.admin import staff
from tests.support.browser import Console, log_in
from tests.support.db import side_effect_pids
from tests.support.processes import Drain, start_drain
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-Console-1"  # pragma: allowlist secret
BEATS = {"WORKER_HEARTBEAT_SECONDS": "0.3"}
CONSUMER = "effect-a-worker"


def row_of(drain: Drain) -> WorkerProcess | None:
    return WorkerProcess.objects.filter(pid=drain.pid, kind="drain_events").first()


def effect_a_done(count: int) -> bool:
    rows = Delivery.objects.filter(consumer=CONSUMER).values_list("status", flat=True)
    return len(rows) == count and set(rows) == {"done"}


def test_quiet_then_stop_a_real_worker_from_the_workers_page(
    browser: Any, live_server: Any, processes: list[Drain], org: Organization, side_effects: None
) -> None:
    quieted = start_drain("--consumer", CONSUMER, "--concurrency", "2", **BEATS)
    other = start_drain("--consumer", CONSUMER, **BEATS)
    processes.extend([quieted, other])
    wait_for(
        lambda: row_of(quieted) is not None and row_of(other) is not None,
        timeout=60,
        what=lambda: quieted.output() + other.output(),
    )
    staff("ops", "core.view_workerprocess", "core.change_workerprocess", password=PASSWORD)
    log_in(browser, live_server.url, "ops", PASSWORD)
    browser.set_window_size(1280, 800)
    ui = Console(browser, live_server.url)
    row = f"tr[data-pid='{quieted.pid}']"
    ui.open("/admin/ops/workers/")
    ui.wait_for_text("= drain 2 + relay 1")
    assert " ".join(ui.find(f"{row} .dc-concurrency").text.split()) == "3 = drain 2 + relay 1"
    version = ui.find(f"{row} code.dc-version").get_attribute("title")
    assert version.startswith("version ") and "unknown" not in version
    heartbeat = ui.find(f"{row} time.dc-when")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", heartbeat.get_attribute("title"))
    assert ui.horizontal_overflow() == 0
    ui.shot("workers-01-two-drains", width=1280)

    ui.find(f"{row} button[name=quiet]").click()
    ui.wait_for_text(f"Asked drain_events pid {quieted.pid} to quiet")
    wait_for(lambda: row_of(quieted).mode == "quiet", timeout=30, what=quieted.output)
    assert "asked to be quiet; claiming nothing more" in quieted.output()
    for n in range(6):
        eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": n})
    wait_for(lambda: effect_a_done(6), timeout=60, what=other.output)
    assert side_effect_pids(CONSUMER) == {other.pid}  # the quiet one claimed none of them
    ui.open("/admin/ops/workers/")
    ui.wait_for_text("quiet asked by user:ops")
    assert ui.find(row).get_attribute("data-mode") == "quiet"
    assert ui.find(row).find_elements(ui.by.CSS_SELECTOR, "button[name=quiet]") == []
    ui.shot("workers-02-one-quiet", width=1280)

    ui.find(f"{row} button[name=stop]").click()
    ui.wait_for_text(f"Asked drain_events pid {quieted.pid} to stop")
    assert quieted.wait(timeout=30) == 0  # finished and exited, as on SIGTERM
    assert "asked to stop; finishing the running work" in quieted.output()
    ui.open("/admin/ops/workers/")
    ui.wait_for_text("stop asked by user:ops")
    assert "dc-worker-stopped" in str(ui.find(row).get_attribute("class"))
    assert "dc-worker-alive" in str(ui.find(f"tr[data-pid='{other.pid}']").get_attribute("class"))
    ui.shot("workers-03-one-stopped", width=1280)
    assert other.poll() is None
    actions = AuditLog.objects.filter(target_id=row_of(quieted).pk).order_by("id")
    assert [(a.action, a.actor) for a in actions] == [
        ("worker.quiet", "user:ops"),
        ("worker.stop", "user:ops"),
    ]
