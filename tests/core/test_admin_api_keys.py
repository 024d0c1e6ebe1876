"""API key admin in a real browser (headless Chromium): the key is shown once on a page a
refresh or the back button cannot re-submit, with a copy button; revoke works.

Skipped, with the reason, where Chromium or ChromeDriver is missing (a failure under CI=true).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

from core.models import ApiKey
from tests.support.browser import copy_then_reload, open_add_form, wait_for


def api_status(base_url: str, key: str) -> int:
    request = urllib.request.Request(
        f"{base_url}/api/v1/events", headers={"Authorization": f"Bearer {key}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # loopback only
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_create_shows_the_key_once_and_revoke_stops_it(
    live_server: Any, transactional_db: None, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    base = live_server.url
    open_add_form(browser, base, "/admin/core/apikey/add/")
    browser.find_element(By.NAME, "name").send_keys("ERP sync")
    browser.find_element(By.CSS_SELECTOR, "input[name=scopes][value='events:read']").click()
    browser.find_element(By.NAME, "_save").click()

    wait_for(browser, lambda b: "/admin/shown-once/" in b.current_url)
    key = browser.find_element(By.ID, "shown-once-0").text
    stored = ApiKey.objects.get()
    assert key.startswith(stored.display_prefix)
    assert stored.scopes == ["events:read"]
    assert api_status(base, key) == 200
    assert browser.find_element(By.ID, "user-tools")  # the normal admin navigation
    assert browser.find_element(By.CSS_SELECTOR, ".breadcrumbs a[href='/admin/']")
    copy_then_reload(browser)  # the page is a GET: nothing is re-submitted, the key is gone
    assert key not in browser.page_source
    browser.back()  # the page before the redirect was the add form, not the POST
    assert key not in browser.page_source
    assert ApiKey.objects.count() == 1

    browser.get(f"{base}/admin/core/apikey/")
    assert stored.display_prefix in browser.page_source
    assert key not in browser.page_source  # shown once, never again

    browser.find_element(
        By.CSS_SELECTOR, f"input[name=_selected_action][value='{stored.pk}']"
    ).click()
    Select(browser.find_element(By.NAME, "action")).select_by_value("revoke_selected")
    browser.find_element(By.NAME, "index").click()
    # The confirmation page (waited for: under load the click returns before it has loaded).
    wait_for(browser, lambda b: "stop working at once" in b.page_source)
    browser.find_element(By.NAME, "reason").send_keys("leaked in a ticket")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit][value='Yes, revoke']").click()
    wait_for(browser, lambda b: "Revoked 1 API key" in b.page_source)

    stored.refresh_from_db()
    assert stored.revoked_at is not None
    assert api_status(base, key) == 401
