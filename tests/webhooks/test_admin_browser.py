"""The webhook secret in a real browser (headless Chromium): shown once after creating or
rotating, on a page that a refresh or the back button cannot re-submit.

Skipped, with the reason, where Chromium or ChromeDriver is missing (a failure under CI=true).
"""

from __future__ import annotations

from typing import Any

from tests.support.browser import copy_then_reload, open_add_form, wait_for
from webhooks import signing
from webhooks.models import Subscription


def test_the_secret_is_shown_once_and_a_refresh_creates_nothing(
    live_server: Any, transactional_db: None, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    base = live_server.url
    open_add_form(browser, base, "/admin/webhooks/subscription/add/")
    browser.find_element(By.NAME, "url").send_keys("https://hooks.example.com/in")
    browser.find_element(By.NAME, "event_types").send_keys("lead.*")
    browser.find_element(By.NAME, "_save").click()

    wait_for(browser, lambda b: "/admin/shown-once/" in b.current_url)
    subscription = Subscription.objects.get()
    secret = signing.decrypt_secret(subscription.secret_encrypted)
    assert browser.find_element(By.ID, "shown-once-0").text == secret
    assert browser.find_element(By.ID, "user-tools")
    copy_then_reload(browser)
    assert secret not in browser.page_source
    browser.back()
    browser.refresh()  # even reloading what the back button shows re-submits nothing
    assert Subscription.objects.count() == 1  # one subscription: events go out once

    browser.get(f"{base}/admin/webhooks/subscription/")
    browser.find_element(
        By.CSS_SELECTOR, f"input[name=_selected_action][value='{subscription.pk}']"
    ).click()
    Select(browser.find_element(By.NAME, "action")).select_by_value("rotate_secret")
    browser.find_element(By.NAME, "index").click()
    wait_for(browser, lambda b: "/admin/shown-once/" in b.current_url)
    subscription.refresh_from_db()
    rotated = signing.decrypt_secret(subscription.secret_encrypted)
    assert rotated != secret and browser.find_element(By.ID, "shown-once-0").text == rotated
    assert "24 hours" in browser.page_source
    browser.refresh()  # no second rotation
    wait_for(browser, lambda b: "already shown" in b.page_source)
    subscription.refresh_from_db()
    assert signing.decrypt_secret(subscription.secret_encrypted) == rotated
