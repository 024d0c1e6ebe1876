"""The workers and consumers pages in a real browser (headless Chromium): a live and a killed
`drain_events`, pause and resume from the admin, and the circuit breaker opening and closing
against a consumer that fails, then recovers. Screenshots go to test-artifacts/admin/."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import pytest
from django.test import override_settings

import eventbus
from core.models import AuditLog, Organization, WorkerProcess
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store.models import ConsumerState, Delivery
from tests.support.admin import staff
from tests.support.browser import Console, log_in
from tests.support.consumers import set_failing
from tests.support.processes import Drain, start_drain
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-Console-1"
OPERATOR = (
    "core.view_workerprocess",
    "eventbus.view_consumerstate",
    "eventbus.pause_consumer",
    "eventbus.replay_consumer",
)
FAST_BEATS = {"HEARTBEAT_SECONDS": 0.3, "STALE_AFTER_BEATS": 3}  # stale after ~1 s of silence


def console(browser: Any, base_url: str) -> Console:
    staff("ops", *OPERATOR, password=PASSWORD)
    log_in(browser, base_url, "ops", PASSWORD)
    return Console(browser, base_url)


def shown(ui: Console, path: str, condition: Callable[[], bool], *, timeout: float = 20) -> None:
    """Reload `path` until `condition()` holds for the page (the pages do not refresh by
    themselves)."""

    def check() -> bool:
        ui.open(path)
        ui.find("#content-main")
        return condition()

    wait_for(check, timeout=timeout, what=lambda: f"{path}: {ui.page_text()[:600]}")


def row_state(ui: Console, css: str) -> str:
    rows = ui.driver.find_elements(ui.by.CSS_SELECTOR, css)
    return str(rows[0].get_attribute("class")) if rows else ""


def registered(drain: Drain) -> bool:
    return WorkerProcess.objects.filter(pid=drain.pid, kind="drain_events").exists()


def test_workers_page_shows_a_live_and_a_killed_worker(
    browser: Any, live_server: Any, processes: list[Drain], org: Organization, side_effects: None
) -> None:
    env = {"WORKER_HEARTBEAT_SECONDS": "0.3"}
    doomed = start_drain("--consumer", "effect-a-worker", "--concurrency", "4", **env)
    alive = start_drain("--consumer", "effect-b-worker", **env)
    processes.extend([doomed, alive])
    wait_for(lambda: registered(doomed) and registered(alive), timeout=60, what="registration")
    for n in range(3):  # work for both, so each has a last claim to show
        eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": n})
    wait_for(
        lambda: (
            WorkerProcess.objects.filter(
                pid__in=[doomed.pid, alive.pid], last_claim_at__isnull=False
            ).count()
            == 2
        ),
        timeout=30,
        what="both workers' heartbeats after a claim",
    )
    ui = console(browser, live_server.url)
    with override_settings(WORKERS=FAST_BEATS):
        ui.open("/admin/")
        ui.click_link("Workers")
        ui.wait_for_text("drain_events")
        assert "dc-worker-alive" in row_state(ui, f"tr[data-pid='{doomed.pid}']")
        assert "dc-worker-alive" in row_state(ui, f"tr[data-pid='{alive.pid}']")
        ui.shot("control-01-workers-alive")

        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        shown(
            ui,
            "/admin/ops/workers/",
            lambda: "dc-worker-stale" in row_state(ui, f"tr[data-pid='{doomed.pid}']"),
        )
        assert "dc-worker-alive" in row_state(ui, f"tr[data-pid='{alive.pid}']")
        ui.shot("control-02-workers-one-killed-stale")

        alive.send_signal(signal.SIGTERM)
        assert alive.wait(timeout=30) == 0
        shown(
            ui,
            "/admin/ops/workers/",
            lambda: "dc-worker-stopped" in row_state(ui, f"tr[data-pid='{alive.pid}']"),
        )
        ui.shot("control-03-workers-stopped-cleanly")
    killed = WorkerProcess.objects.get(pid=doomed.pid)
    assert (killed.concurrency, killed.pumps, killed.stopped_at) == (
        5,
        "drain, relay",
        None,
    )  # 4 handler threads + the relay


def pending_uncharged(consumer: str) -> bool:
    rows = Delivery.objects.filter(consumer=consumer).values_list("status", "attempts")
    return set(rows) == {("pending", 0)}


def test_pause_and_resume_from_the_admin(
    browser: Any, live_server: Any, org: Organization, side_effects: None
) -> None:
    ui = console(browser, live_server.url)
    ui.open("/admin/")
    ui.click_link("Consumers")
    ui.wait_for_text("effect-a-worker")
    row = "tr[data-consumer='effect-a-worker']"
    ui.find(f"{row} input[name=reason]").send_keys("CRM API down for maintenance")
    ui.find(f"{row} button[name=pause]").click()
    ui.wait_for_text("Paused effect-a-worker")
    assert ui.find(row).get_attribute("data-state") == "paused"
    ui.shot("control-04-consumer-paused")

    for n in range(3):
        eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": n})
    worker = Worker(WorkerOptions(consumers=["effect-a-worker", "effect-b-worker"], listen=False))
    while worker.run_once():
        pass
    assert pending_uncharged("effect-a-worker")
    assert set(
        Delivery.objects.filter(consumer="effect-b-worker").values_list("status", flat=True)
    ) == {"done"}

    ui.find(f"{row} button[name=resume]").click()
    ui.wait_for_text("Resumed effect-a-worker")
    ui.shot("control-05-consumer-resumed")
    while worker.run_once():
        pass
    assert set(
        Delivery.objects.filter(consumer="effect-a-worker").values_list("status", "attempts")
    ) == {("done", 1)}
    assert sorted(
        AuditLog.objects.filter(target_id="effect-a-worker").values_list("action", "actor")
    ) == [
        ("consumer.pause", "user:ops"),
        ("consumer.resume", "user:ops"),
    ]


def breaker_state() -> str:
    state = ConsumerState.objects.filter(pk="recovering-worker").first()
    return state.state if state else "running"


def test_circuit_breaker_opens_then_closes_in_the_admin(
    browser: Any, live_server: Any, org: Organization, side_effects: None, processes: list[Drain]
) -> None:
    ui = console(browser, live_server.url)  # logged in first: the page is then one load away
    set_failing("recovering-worker", True)
    drain = start_drain(
        "--consumer",
        "recovering-worker",
        EVENTBUS_BREAKER_ENABLED="true",
        EVENTBUS_BREAKER_MIN_VOLUME="3",
        EVENTBUS_BREAKER_COOL_DOWN_SECONDS="8",
        EVENTBUS_RETRY_SCHEDULE="0.5",
        EVENTBUS_RETRY_JITTER="0",
    )
    processes.append(drain)
    for n in range(4):
        eventbus.emit("test.recovering", organization=org, entity_kind="t", payload={"n": n})
    wait_for(lambda: breaker_state() == "open", timeout=30, what=drain.output)
    row = "tr[data-consumer='recovering-worker']"
    # While the API is down the state is open, half-open only while a probe runs.
    shown(ui, "/admin/ops/consumers/", lambda: ui.find(row).get_attribute("data-state") == "open")
    reason = ui.find(row).text
    assert "deliveries failed within 60s" in reason or "the probe delivery failed" in reason
    ui.shot("control-06-breaker-open")
    assert "ALERT: consumer circuit breaker open" in drain.output()
    assert Delivery.objects.filter(consumer="recovering-worker", status="dead").count() == 0

    set_failing("recovering-worker", False)  # the downstream API is back
    shown(
        ui,
        "/admin/ops/consumers/",
        lambda: ui.find(row).get_attribute("data-state") == "running",
        timeout=40,
    )
    assert "the probe delivery succeeded" in ui.find(row).text
    ui.shot("control-07-breaker-closed")
    wait_for(
        lambda: (
            set(
                Delivery.objects.filter(consumer="recovering-worker").values_list(
                    "status", flat=True
                )
            )
            == {"done"}
        ),
        timeout=30,
        what=drain.output,
    )


def test_replay_a_consumer_from_the_admin_preview_first(
    browser: Any, live_server: Any, org: Organization, side_effects: None
) -> None:
    for n in range(3):
        eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": n})
    worker = Worker(WorkerOptions(consumers=["effect-a-worker", "effect-b-worker"], listen=False))
    while worker.run_once():
        pass
    ui = console(browser, live_server.url)
    ui.driver.set_window_size(1280, 900)
    ui.open("/admin/ops/consumers/")
    ui.click_link("Replay…", within="tr[data-consumer='effect-a-worker']")
    ui.wait_for_text("no other consumer is touched")
    since = ui.find("input[name=since]")
    ui.driver.execute_script("arguments[0].value = '2020-01-01T00:00'", since)
    ui.find("input[name=reason]").send_keys("effect-a had a bug for two hours")
    ui.find("button[name=preview]").click()
    ui.wait_for_text("3 events of test.effect in the window")
    assert ui.find("tr[data-status='done']").text.split()[:2] == ["done", "3"]
    assert ui.horizontal_overflow() == 0
    assert not Delivery.objects.filter(replay_id__isnull=False).exists()  # a preview only
    ui.shot("control-08-replay-preview", width=1280)

    ui.find("button[name=replay]").click()
    ui.wait_for_text("3 deliveries queued")
    ui.shot("control-09-replay-queued", width=1280)
    replayed = Delivery.objects.filter(replay_id__isnull=False)
    assert {(d.consumer, d.status) for d in replayed} == {("effect-a-worker", "pending")}
    assert replayed.count() == 3
    assert set(
        Delivery.objects.filter(consumer="effect-b-worker").values_list("status", flat=True)
    ) == {"done"}
    [entry] = AuditLog.objects.filter(action="consumer.replay")
    assert (entry.actor, entry.reason) == ("user:ops", "effect-a had a bug for two hours")
