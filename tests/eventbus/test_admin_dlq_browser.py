"""The DLQ at a laptop's width (1280 px) in a real browser: no horizontal scroll, every column on
screen, the root cause visible next to the final error, short ids that copy the whole id."""

from __future__ import annotations

from typing import Any

import pytest

from core.models import Organization
from tests.support.admin import DLQ_OPERATOR, staff
from tests.support.browser import Console, log_in
from tests.support.dlq import make_dead, webhook_dead_letter

PASSWORD = "pw-Console-1"
LAPTOP = 1280

pytestmark = pytest.mark.slow


@pytest.mark.django_db(transaction=True)
def test_the_dlq_reads_at_1280_px_without_horizontal_scroll(browser: Any, live_server: Any) -> None:
    org = Organization.objects.create(name="Acme Store with a long name", slug="acme")
    webhook_dead_letter(org, description="Order sync to the warehouse ERP")
    make_dead(org, 3, entity_kind="contact", request_id="req-checkout-42")
    permissions = ("webhooks.view_subscription", "webhooks.change_subscription")
    staff("support", *DLQ_OPERATOR, *permissions, password=PASSWORD)
    browser.set_window_size(LAPTOP, 900)
    log_in(browser, live_server.url, "support", PASSWORD)
    ui = Console(browser, live_server.url)

    ui.open("/admin/eventbus/deadletter/")
    ui.wait_for_text("4 dead letters")
    assert ui.horizontal_overflow() <= 0, "the DLQ scrolls sideways at 1280 px"
    assert_columns_on_screen(ui, ("attempts", "last error"))
    root = ui.find(".dc-root")
    assert root.is_displayed() and "HTTP 500: upstream exploded" in root.text
    assert ui.find(".dc-consumer a").text == "Order sync to the warehouse ERP"
    ui.shot("dlq-1280", width=LAPTOP)

    copy = ui.find("button.dc-copy")
    copy.click()
    ui.wait.until(lambda d: copy.text == "copied")

    ui.find("tr:has(.dc-root) .field-event_summary a").click()  # the webhook letter
    ui.wait_for_text("Attempt history")
    assert "HTTP 500: upstream exploded" in ui.find(".field-root_cause_full").text
    assert ui.horizontal_overflow() <= 0, "the letter's page scrolls sideways at 1280 px"
    ui.shot("dlq-detail-1280", width=LAPTOP)
    ui.find("#reprocess-one").click()
    ui.wait_for_text("Reprocess into a disabled consumer?")
    ui.shot("dlq-reprocess-disabled-1280", width=LAPTOP)
    ui.find("#enable-and-reprocess").click()
    ui.wait_for_text("Enabled 1 consumer(s). Reprocessed 1 of 1 dead letter(s).")


def assert_columns_on_screen(ui: Console, titles: tuple[str, ...]) -> None:
    """The table does not scroll inside its box either, and each column header ends inside
    both the box and the window (the admin wraps the table in an `overflow: auto` div)."""
    box = ui.find("#changelist .results")
    inner = ui.driver.execute_script(
        "return arguments[0].scrollWidth - arguments[0].clientWidth", box
    )
    assert inner <= 0, f"the table scrolls sideways inside its box by {inner} px"
    edge = min(box.rect["x"] + box.rect["width"], LAPTOP)
    headers = ui.driver.find_elements(ui.by.CSS_SELECTOR, "#result_list thead th")
    right = {
        header.text.strip().lower(): header.rect["x"] + header.rect["width"] for header in headers
    }
    for title in titles:
        assert title in right, f"no {title!r} column: {sorted(right)}"
        assert right[title] <= edge + 1, f"{title!r} ends at {right[title]} px, the box at {edge}"
