"""The install flow in a real browser (headless Chromium): admin "Connect a store" -> the fake
Nuvemshop authorize page on loopback -> accept -> the callback with code and state -> the store
is connected and the admin says so. Skipped where Chromium is missing (a failure under CI=true).
"""

from __future__ import annotations

from typing import Any

from core.models import Organization
from eventbus.store.models import EventLog
from nuvemshop.models import Store
from tests.support.browser import log_in, wait_for
from tests.support.nuvemshop import fake_nuvemshop

PASSWORD = "a-long-test-password"


def test_connect_a_store_from_the_admin(
    live_server: Any, transactional_db: None, browser: Any, settings: Any
) -> None:
    from django.contrib.auth.models import User
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    with fake_nuvemshop() as fake:
        settings.NUVEMSHOP = fake.settings()
        fake.add_store(789, token="tok-789")
        fake.redirect_url = f"{live_server.url}/admin/nuvemshop/install/callback/"
        Organization.objects.create(name="Acme", slug="acme")
        User.objects.create_superuser("ops", "ops@example.com", PASSWORD)
        log_in(browser, live_server.url, "ops", PASSWORD)

        browser.get(f"{live_server.url}/admin/nuvemshop/store/")
        browser.find_element(By.ID, "connect-store").click()
        Select(browser.find_element(By.NAME, "organization")).select_by_visible_text("Acme")
        browser.find_element(By.ID, "connect-submit").click()
        wait_for(
            browser, lambda b: b.current_url.startswith(f"{fake.base_url}/apps/4321/authorize")
        )
        assert "state=" in browser.current_url
        browser.find_element(By.ID, "accept").click()

        wait_for(
            browser,
            lambda b: "/admin/nuvemshop/store/" in b.current_url and "/change/" in b.current_url,
        )
        assert "Store 789 connected" in browser.page_source
        store = Store.objects.get(ns_store_id=789)
        assert store.status == "connected" and store.access_token == "tok-789"
        assert EventLog.objects.filter(event_type="nuvemshop.store_connected").count() == 1

        browser.set_window_size(1280, 900)  # the stores list reads at 1280 px: no sideways scroll
        browser.get(f"{live_server.url}/admin/nuvemshop/store/")
        row = browser.find_element(By.CSS_SELECTOR, "#result_list tbody tr")
        assert "connected" in row.text and "Acme" in row.text
        overflow = browser.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0
