"""The real browser for admin tests: the system's headless Chromium through Selenium, and small
page helpers. Nothing is downloaded at run time."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
MISSING = (
    "needs Chromium and chromedriver ({}, {}); on Debian: apt-get install chromium chromium-driver"
)
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
# How long a page may take to load or show what a test waits for. Generous: on a loaded 2-core
# machine (the suite's parallel workers, other work) a page load through the live server has
# taken over 30 s, and the old 15 s turned load into failures (docs/testing.md). A passing
# test never waits it out.
WAIT = 60.0
# Console.hidden_content: one line per thing the window cuts off on the right.
HIDDEN_CONTENT_JS = """
const root = document.documentElement, width = root.clientWidth, found = [];
const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
  + (el.classList.length ? '.' + [...el.classList].join('.') : '');
const preformatted = (el) => el.closest('pre, textarea, .dc-json, .dc-error');
if (root.scrollWidth > width) found.push(`the page is ${root.scrollWidth - width} px too wide`);
for (const el of document.querySelectorAll('#content *')) {
  const style = getComputedStyle(el);
  if (['auto', 'scroll'].includes(style.overflowX) && el.scrollWidth > el.clientWidth + 1
      && !preformatted(el)) {
    found.push(`${name(el)} scrolls sideways by ${el.scrollWidth - el.clientWidth} px`);
  }
}
for (const el of document.querySelectorAll(
    '#content table, #content button, #content input, #content select, #content a.button')) {
  const right = el.getBoundingClientRect().right;
  if (el.offsetParent !== null && right > width + 1 && !preformatted(el)) {
    found.push(`${name(el)} ends at ${Math.round(right)} px (window ${width} px)`);
  }
}
return found;
"""


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless Chromium; missing, the test is skipped, or fails under CI=true (.ci/run
    installs it, so CI can never pass without having opened the admin in a browser)."""
    yield from _chromium()


@pytest.fixture(scope="module")
def module_browser() -> Iterator[Any]:
    """`browser`, one for the tests of a module (a browser start costs seconds: docs/testing.md);
    each test logs in again (the database is emptied between tests)."""
    yield from _chromium()


def _chromium() -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        reason = MISSING.format(CHROMIUM, CHROMEDRIVER)
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true: {reason}")
        pytest.skip(reason)
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    profile = tempfile.mkdtemp(prefix="deskcomm-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    service = webdriver.ChromeService(executable_path=CHROMEDRIVER)
    driver = webdriver.Chrome(options=options, service=service)
    driver.implicitly_wait(5)  # find_element waits for the element a page is still rendering
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
        except Exception as exc:
            self.shot("failure")
            try:
                shown = self.page_text()[:600]
            except Exception as unreadable:  # the renderer that timed out may not answer
                shown = f"(unreadable: {unreadable!r})"
            raise AssertionError(
                f"{text!r} not on {self.driver.current_url} ({type(exc).__name__}); it shows: "
                f"{shown}"
            ) from exc

    def horizontal_overflow(self) -> int:
        """How many CSS pixels the page is wider than the window (0: no horizontal scroll)."""
        return int(
            self.driver.execute_script(
                "const d = document.documentElement; return d.scrollWidth - d.clientWidth"
            )
        )

    def hidden_content(self) -> list[str]:
        """What the window does not show without scrolling sideways: the page wider than the
        window, a box that scrolls sideways (the admin wraps each changelist's table in one), a
        table or a control whose right edge is past the window. Truncated text (an ellipsis)
        and preformatted blocks (payloads, errors) do not count."""
        return list(self.driver.execute_script(HIDDEN_CONTENT_JS))

    def page_text(self) -> str:
        body = self.driver.find_element(self.by.TAG_NAME, "body")
        return " ".join(str(body.get_attribute("textContent")).split())

    def shot(self, name: str, width: int = 1440) -> Path:
        height = self.driver.execute_script("return document.documentElement.scrollHeight")
        self.driver.set_window_size(width, max(900, min(int(height) + 40, 4000)))
        target = ARTIFACTS / f"{name}.png"
        assert self.driver.save_screenshot(str(target)), f"screenshot {target} failed"
        return target

    def run_action(self, action: str) -> None:
        from selenium.webdriver.support.ui import Select

        self.find("input.action-select").click()  # the first row
        Select(self.find("select[name=action]")).select_by_value(action)
        self.find("button[name=index]").click()


def log_in(driver: Any, base_url: str, username: str, password: str) -> None:
    """Log in through the admin's own login form."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{base_url}/admin/login/")
    driver.find_element(By.NAME, "username").send_keys(username)
    driver.find_element(By.NAME, "password").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    WebDriverWait(driver, WAIT).until(lambda d: "/admin/login/" not in d.current_url)


def wait_for(driver: Any, condition: Any) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, WAIT).until(condition)


def click_to_new_page(driver: Any, element: Any) -> None:
    """Click `element` and wait until the browser shows the next document, fully loaded.

    The old page is marked with a window property the new document does not have. While the
    page changes, ChromeDriver may answer a probe with a transient error instead of a stale
    element ("Node with given id does not belong to the document"): those probes count as "not
    yet", and only the deadline decides failure."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    driver.execute_script("window.__deskcommOldPage = true;")
    element.click()
    WebDriverWait(driver, WAIT, ignored_exceptions=(WebDriverException,)).until(
        lambda d: d.execute_script(
            "return !window.__deskcommOldPage && document.readyState === 'complete';"
        )
    )


def open_add_form(driver: Any, base_url: str, add_path: str) -> None:
    """As a fresh superuser ("ops"), the admin add form at `add_path`, with the organization
    "Acme" (created here) picked."""
    from django.contrib.auth.models import User
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from core.models import Organization

    Organization.objects.create(name="Acme", slug="acme")
    User.objects.create_superuser("ops", "ops@example.com", "a-long-test-password")
    log_in(driver, base_url, "ops", "a-long-test-password")
    driver.get(f"{base_url}{add_path}")
    Select(driver.find_element(By.NAME, "organization")).select_by_visible_text("Acme")


def copy_then_reload(driver: Any) -> None:
    """On a shown-once page: the copy button says it copied; a reload shows the value no more
    (the page is a GET: nothing is re-submitted)."""
    from selenium.webdriver.common.by import By

    copy = driver.find_element(By.CSS_SELECTOR, "button.shown-once-copy")
    copy.click()
    wait_for(driver, lambda d: copy.text == "Copied")
    driver.refresh()
    wait_for(driver, lambda d: "already shown" in d.page_source)
