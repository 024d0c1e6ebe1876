"""The admin login in a real browser (headless Chromium): a staff user's first login enrols a
TOTP device from the page (secret read from it, code from an authenticator's arithmetic), the
index opens; failed logins lock the account out, the right password included. Skipped where
Chromium is missing (a failure under CI=true)."""

from __future__ import annotations

import base64
from typing import Any

from django_otp.oath import totp

from tests.support.admin import staff
from tests.support.browser import click_to_new_page, log_in, wait_for

PASSWORD = "pw-Console-1"  # pragma: allowlist secret


def authenticator_code(secret: str) -> str:
    """What an authenticator app shows for `secret` (base32, as the page prints it) now."""
    key = base64.b32decode(secret + "=" * (-len(secret) % 8))
    return f"{totp(key):06d}"


def submit_login(browser: Any, base_url: str, password: str) -> str:
    """Submit the admin's login form as "ops"; what the answer page says."""
    from selenium.webdriver.common.by import By

    browser.get(f"{base_url}/admin/login/")
    browser.find_element(By.NAME, "username").send_keys("ops")
    browser.find_element(By.NAME, "password").send_keys(password)
    click_to_new_page(browser, browser.find_element(By.CSS_SELECTOR, "input[type=submit]"))
    text = browser.find_element(By.TAG_NAME, "body").text.lower()
    return (
        "locked" if "account locked" in text else "refused" if "correct username" in text else text
    )


def test_first_login_enrols_a_totp_device_then_lockout_after_failures(
    live_server: Any, transactional_db: None, browser: Any, settings: Any
) -> None:
    from selenium.webdriver.common.by import By

    settings.ADMIN_OTP_REQUIRED = True
    settings.AXES_FAILURE_LIMIT = 3
    staff("ops", "crm.view_contact")
    log_in(browser, live_server.url, "ops", PASSWORD)
    wait_for(browser, lambda b: "/admin/otp/enrol/" in b.current_url)
    assert browser.find_element(By.CSS_SELECTOR, "#otp-qr svg").is_displayed()
    assert browser.find_element(By.ID, "otp-uri").text.startswith("otpauth://totp/")
    secret = browser.find_element(By.ID, "otp-secret").text
    browser.find_element(By.NAME, "token").send_keys(authenticator_code(secret))
    browser.find_element(By.CSS_SELECTOR, "#otp-form input[type=submit]").click()
    wait_for(browser, lambda b: b.current_url == f"{live_server.url}/admin/")
    assert "Contacts" in browser.page_source

    browser.delete_all_cookies()
    answers = [submit_login(browser, live_server.url, "not-the-password") for _ in range(3)]
    assert answers == ["refused", "refused", "locked"]
    assert submit_login(browser, live_server.url, PASSWORD) == "locked"
    browser.get(f"{live_server.url}/admin/")
    wait_for(browser, lambda b: "/admin/login/" in b.current_url)
