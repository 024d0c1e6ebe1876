"""The operations console in a real browser (headless Chromium from the system, via Selenium).

Logs in as a staff user holding only the console permissions, opens the DLQ, filters it,
reprocesses one dead letter, discards one through the confirmation page, opens the status page and
an event. Screenshots of every step go to test-artifacts/admin/. Without Chromium and
chromedriver it is skipped with the reason, except under CI=true where that is a failure
(tests/support/browser.py; nothing is downloaded at run time).
"""

from __future__ import annotations

from typing import Any

import pytest

from core.models import AuditLog, Organization
from eventbus.store.models import Delivery
from tests.support.admin import DLQ_OPERATOR, staff
from tests.support.browser import ARTIFACTS, Console
from tests.support.dlq import BROKEN, broken_consumer, make_dead

PASSWORD = "pw-Console-1"

pytestmark = pytest.mark.slow


@pytest.mark.django_db(transaction=True)
def test_operator_works_the_dlq_in_a_real_browser(browser: Any, live_server: Any) -> None:
    org = Organization.objects.create(name="Acme Store", slug="acme")
    with broken_consumer():
        run_console(browser, live_server.url, org)


def run_console(browser: Any, base_url: str, org: Organization) -> None:
    make_dead(
        org,
        3,
        entity_kind="contact",
        request_id="req-checkout-42",
        payload={"note": "<script>alert(1)</script>"},
    )
    make_dead(org, 2, event_type="test.job", entity_kind="order")
    staff(
        "support",
        *DLQ_OPERATOR,
        "eventbus.view_delivery",
        "eventbus.view_eventlog",
        "core.view_auditlog",
        password=PASSWORD,
    )
    ui = Console(browser, base_url)

    ui.open("/admin/login/")
    ui.find("#id_username").send_keys("support")
    ui.find("#id_password").send_keys(PASSWORD)
    ui.find("input[type=submit]").click()
    ui.wait_for_text("Operations")
    ui.shot("01-index")

    ui.find("#operations-module a").click()
    ui.wait_for_text("5 dead letters")
    ui.shot("02-dlq")

    ui.click_link("PermanentError", within="#changelist-filter")
    ui.wait_for_text("2 dead letters")
    ui.shot("03-dlq-filtered")
    ui.run_action("reprocess_selected")
    ui.wait_for_text("Reprocessed 1 of 1 dead letter(s).")
    ui.shot("04-reprocessed")
    assert Delivery.objects.filter(consumer=BROKEN, status="pending", attempts=0).count() == 1

    ui.open("/admin/eventbus/deadletter/?consumer=flaky-worker")
    ui.wait_for_text("3 dead letters")
    ui.run_action("discard_selected")
    ui.wait_for_text("Discard 1 dead letter?")
    ui.find("#id_reason").send_keys("duplicate contact, merged by hand")
    ui.shot("05-discard-confirmation")
    ui.find("#confirm-discard").click()
    ui.wait_for_text("Discarded 1 of 1 dead letter(s).")
    ui.shot("06-discarded")
    assert Delivery.objects.filter(status="discarded").count() == 1
    entry = AuditLog.objects.get(action="delivery.discard")
    assert (entry.actor, entry.reason) == ("user:support", "duplicate contact, merged by hand")

    ui.find("#reprocess-matching").click()
    ui.wait_for_text("Reprocess 2 dead letters?")
    ui.shot("07-reprocess-all-matching")

    ui.open("/admin/ops/status/")
    ui.wait_for_text("By event type and consumer")
    assert browser.find_elements(ui.by.CSS_SELECTOR, "svg.dc-chart")
    ui.shot("08-status")

    dead = Delivery.objects.filter(status="dead", consumer="flaky-worker").first()
    assert dead is not None
    ui.open(f"/admin/eventbus/eventlog/{dead.event_id}/change/")
    ui.wait_for_text("Deliveries (one per consumer)")
    assert "<script>alert(1)</script>" in ui.find(".dc-json").text  # shown as text, not run
    ui.shot("09-event")

    ui.click_link("req-checkout-42")
    ui.wait_for_text("attempt 1")
    ui.shot("10-correlation-request")
    ui.open(f"/admin/ops/correlation/?request_id={entry.request_id}")
    ui.wait_for_text("delivery.discard")
    ui.shot("11-correlation-operator-action")
    assert (ARTIFACTS / "08-status.png").stat().st_size > 10_000
