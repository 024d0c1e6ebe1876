"""The operations console in a real browser (headless Chromium from the system, via Selenium).

Logs in as a staff user holding only the console permissions, opens the DLQ, filters it,
reprocesses one dead letter, discards one through the confirmation page, opens the status page and
an event. Screenshots of every step go to test-artifacts/admin/. Skipped, with the reason, when
Chromium or chromedriver is not installed (nothing is downloaded at run time).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deskcomm.models import AuditLog, Organization
from eventbus.models import Delivery
from tests.support.admin import DLQ_OPERATOR, staff
from tests.support.dlq import BROKEN, broken_consumer, make_dead

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "admin"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1440,1000",
)
PASSWORD = "pw-Console-1"
WAIT = 15.0

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()),
        reason=f"needs Chromium and chromedriver ({CHROMIUM}, {CHROMEDRIVER}); "
        "on Debian: apt-get install chromium chromium-driver",
    ),
]


@pytest.fixture
def browser() -> Iterator[Any]:
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    profile = tempfile.mkdtemp(prefix="deskcomm-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    service = webdriver.ChromeService(executable_path=CHROMEDRIVER)
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(WAIT * 2)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


class Console:
    """Small page helpers: navigate, wait, click, screenshot."""

    def __init__(self, driver: Any, base_url: str) -> None:
        from selenium.common.exceptions import (
            NoSuchElementException,
            StaleElementReferenceException,
        )
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        self.driver = driver
        self.base = base_url
        self.by = By
        # While a page is replaced, elements of the old one go stale: keep polling.
        self.wait = WebDriverWait(
            driver,
            WAIT,
            ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
        )
        ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def open(self, path: str) -> None:
        self.driver.get(self.base + path)

    def find(self, css: str) -> Any:
        return self.wait.until(lambda d: d.find_element(self.by.CSS_SELECTOR, css))

    def click_link(self, text: str, within: str = "body") -> None:
        self.find(within).find_element(self.by.LINK_TEXT, text).click()

    def wait_for_text(self, text: str) -> None:
        """Wait until the page's text (as in the HTML, before CSS transforms) contains `text`."""
        try:
            self.wait.until(lambda d: text in self.page_text())
        except Exception:
            self.shot("failure")
            raise AssertionError(f"{text!r} not on {self.driver.current_url}") from None

    def page_text(self) -> str:
        body = self.driver.find_element(self.by.TAG_NAME, "body")
        return " ".join(str(body.get_attribute("textContent")).split())

    def shot(self, name: str) -> Path:
        height = self.driver.execute_script("return document.documentElement.scrollHeight")
        self.driver.set_window_size(1440, max(900, min(int(height) + 40, 4000)))
        target = ARTIFACTS / f"{name}.png"
        assert self.driver.save_screenshot(str(target)), f"screenshot {target} failed"
        return target

    def run_action(self, action: str) -> None:
        from selenium.webdriver.support.ui import Select

        self.find("input.action-select").click()  # the first row
        Select(self.find("select[name=action]")).select_by_value(action)
        self.find("button[name=index]").click()


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
        "deskcomm.view_auditlog",
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
