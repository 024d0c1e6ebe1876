"""Headless Chromium (the system's, via Selenium) for admin tests, and logging in with it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
WAIT = 15.0

needs_chromium = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="Chromium/ChromeDriver not installed (apt-get install chromium chromium-driver)",
)


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium with its own throw-away profile."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    profile = tempfile.mkdtemp(prefix="deskcomm-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    flags = ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu")
    for flag in (*flags, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(
        options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER)
    )
    driver.implicitly_wait(5)
    driver.set_page_load_timeout(WAIT * 2)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def log_in(driver: Any, base_url: str, username: str, password: str) -> None:
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
