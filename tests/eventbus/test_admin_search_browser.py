"""Issue 44 in a real browser at 1280x800 (one Chromium for the module): the DLQ found by the
short id it shows and by part of an error, a dead letter's traceback opened at its file:line,
and Retry now on the deliveries waiting to retry. Screenshots go to test-artifacts/admin/."""

from __future__ import annotations

from typing import Any

import pytest

from core.models import Organization
from eventbus.store.models import Delivery
from tests.support.admin import DLQ_OPERATOR, staff
from tests.support.browser import Console, log_in
from tests.support.dlq import (
    TRACED_RAISE_LINE,
    fail_traced,
    make_dead,
    make_retrying,
    traced_consumer,
)

PASSWORD = "pw-Console-1"  # pragma: allowlist secret
LAPTOP = (1280, 800)

pytestmark = pytest.mark.slow


@pytest.mark.django_db(transaction=True)
def test_search_traceback_and_retry_now_at_1280_px(browser: Any, live_server: Any) -> None:
    org = Organization.objects.create(name="Acme Store", slug="acme")
    letters = make_dead(org, 4)
    (waiting,) = make_retrying(org, 1)
    with traced_consumer():
        traced = fail_traced(org, attempts=2)
    staff(
        "support",
        *DLQ_OPERATOR,
        "eventbus.view_delivery",
        "eventbus.retry_delivery",
        password=PASSWORD,
    )
    browser.set_window_size(*LAPTOP)
    log_in(browser, live_server.url, "support", PASSWORD)
    ui = Console(browser, live_server.url)

    # Partial search: the short id as shown, then part of an error text.
    ui.open("/admin/eventbus/deadletter/")
    ui.wait_for_text("5 dead letters")
    target = letters[2]
    shown = f"…{str(target.event_id)[-8:]}"
    links = [a.text for a in browser.find_elements(ui.by.CSS_SELECTOR, ".dc-id code a")]
    assert shown in links and len(set(links)) == len(links) == 5
    search(ui, shown)
    ui.wait_for_text("1 result")
    (row,) = browser.find_elements(ui.by.CSS_SELECTOR, "#result_list tbody tr")
    assert shown in row.text
    assert ui.horizontal_overflow() <= 0
    ui.shot("search-short-id-1280", width=LAPTOP[0])
    search(ui, "always fai")
    ui.wait_for_text("4 results")
    ui.shot("search-error-text-1280", width=LAPTOP[0])

    # The traceback of the letter that died in traced-worker: collapsed, file:line in view.
    ui.open(f"/admin/eventbus/deadletter/{traced.pk}/change/")
    ui.wait_for_text("Attempt history")
    summary = ui.find(".field-traceback_full details.dc-trace summary")
    assert f"dlq.py:{TRACED_RAISE_LINE}" in summary.text and "call_the_crm" in summary.text
    trace = ui.find(".field-traceback_full details.dc-trace pre")
    assert not trace.is_displayed()
    summary.click()
    ui.wait.until(lambda d: trace.is_displayed())
    assert "Traceback (most recent call last):" in trace.text
    assert trace.value_of_css_property("font-family").split(",")[0].strip("\"'") in (
        "ui-monospace",
        "SFMono-Regular",
        "Menlo",
        "Consolas",
        "monospace",
    )
    assert ui.horizontal_overflow() <= 0
    ui.shot("dlq-traceback-1280", width=LAPTOP[0])

    # Retry now on the deliveries waiting to retry.
    ui.open("/admin/eventbus/delivery/?status=retrying")
    ui.wait_for_text("1 delivery")
    ui.run_action("retry_now_selected")
    ui.wait_for_text("Retried 1 of 1 deliveries now")
    assert ui.horizontal_overflow() <= 0
    ui.shot("deliveries-retry-now-1280", width=LAPTOP[0])
    after = Delivery.objects.get(pk=waiting.pk)
    assert after.status == "pending" and after.next_attempt_at < waiting.next_attempt_at


def search(ui: Console, term: str) -> None:
    box = ui.find("#searchbar")
    box.clear()
    box.send_keys(term)
    box.submit()
