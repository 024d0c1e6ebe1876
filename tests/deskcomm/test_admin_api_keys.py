"""API key admin in a real browser (headless Chromium): create shows the key once, revoke works.

Skipped, with the reason, where Chromium, ChromeDriver or selenium is not installed.
"""

from __future__ import annotations

import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from deskcomm.models import ApiKey, Organization

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
if not (CHROMIUM and CHROMEDRIVER):
    pytest.skip("Chromium/ChromeDriver not installed (apt-get install chromium chromium-driver)",
                allow_module_level=True)  # fmt: skip

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402


@pytest.fixture
def browser() -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    service = webdriver.ChromeService(executable_path=CHROMEDRIVER)
    driver = webdriver.Chrome(options=options, service=service)
    driver.implicitly_wait(5)
    yield driver
    driver.quit()


def api_status(base_url: str, key: str) -> int:
    request = urllib.request.Request(
        f"{base_url}/api/v1/events", headers={"Authorization": f"Bearer {key}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # loopback only
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def log_in(browser: Any, base_url: str) -> None:
    User.objects.create_superuser("ops", "ops@example.com", "a-long-test-password")
    browser.get(f"{base_url}/admin/login/")
    browser.find_element(By.NAME, "username").send_keys("ops")
    browser.find_element(By.NAME, "password").send_keys("a-long-test-password")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda b: "/admin/login/" not in b.current_url)


def test_create_shows_the_key_once_and_revoke_stops_it(
    live_server: Any, transactional_db: None, browser: Any
) -> None:
    base = live_server.url
    Organization.objects.create(name="Acme", slug="acme")
    log_in(browser, base)

    browser.get(f"{base}/admin/deskcomm/apikey/add/")
    Select(browser.find_element(By.NAME, "organization")).select_by_visible_text("Acme")
    browser.find_element(By.NAME, "name").send_keys("ERP sync")
    browser.find_element(By.CSS_SELECTOR, "input[name=scopes][value='events:read']").click()
    browser.find_element(By.NAME, "_save").click()

    key = browser.find_element(By.ID, "issued-key").text
    stored = ApiKey.objects.get()
    assert key.startswith(stored.display_prefix)
    assert stored.scopes == ["events:read"]
    assert api_status(base, key) == 200

    browser.get(f"{base}/admin/deskcomm/apikey/")
    assert stored.display_prefix in browser.page_source
    assert key not in browser.page_source  # shown once, never again

    browser.find_element(
        By.CSS_SELECTOR, f"input[name=_selected_action][value='{stored.pk}']"
    ).click()
    Select(browser.find_element(By.NAME, "action")).select_by_value("revoke_selected")
    browser.find_element(By.NAME, "index").click()
    # The confirmation page (waited for: under load the click returns before it has loaded).
    WebDriverWait(browser, 10).until(lambda b: "stop working at once" in b.page_source)
    browser.find_element(By.NAME, "reason").send_keys("leaked in a ticket")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit][value='Yes, revoke']").click()
    WebDriverWait(browser, 10).until(lambda b: "Revoked 1 API key" in b.page_source)

    stored.refresh_from_db()
    assert stored.revoked_at is not None
    assert api_status(base, key) == 401
