"""Admin login hardening: lockout after failed logins (django-axes), the recovery command, the
TOTP second factor (core.admin_otp) with its enrolment, and the session cookie's settings.
Real requests through the admin's own login form (Django's test client)."""

from __future__ import annotations

import datetime as dt
import re
from io import StringIO
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django_otp.oath import TOTP
from django_otp.plugins.otp_totp.models import TOTPDevice

from tests.support.admin import staff

pytestmark = pytest.mark.django_db

PASSWORD = "pw-Console-1"  # pragma: allowlist secret


def log_in(client: Client, password: str = PASSWORD) -> Any:
    return client.post("/admin/login/?next=/admin/", {"username": "ops", "password": password})


def code_of(device: TOTPDevice) -> str:
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
    return f"{totp.token():0{device.digits}d}"


def test_a_login_is_locked_out_after_the_failure_limit_and_unlocked_by_the_recovery_command(
    settings: Any,
) -> None:
    settings.AXES_FAILURE_LIMIT = 3
    staff("ops")
    client = Client()
    for _ in range(2):
        assert log_in(client, "wrong").status_code == 200  # the form again, with its error
    assert log_in(client, "wrong").status_code == 429  # the third: locked out
    assert log_in(client).status_code == 429  # even the right password, now
    assert client.get("/admin/").status_code == 302  # not logged in
    out = StringIO()
    call_command("admin_recover", "ops", stdout=out)
    assert (
        "ops: removed 0 two-factor device(s); cleared 1 failed-login record(s)." in out.getvalue()
    )
    response = log_in(client)
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200


def test_the_recovery_command_names_an_unknown_user() -> None:
    with pytest.raises(Exception, match="no user named 'nobody'"):
        call_command("admin_recover", "nobody")


def test_staff_enrol_a_totp_device_then_verify_with_it_at_each_login(settings: Any) -> None:
    settings.ADMIN_OTP_REQUIRED = True
    user = staff("ops", organizations=[])
    client = Client()
    start = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)
    with time_machine.travel(start, tick=False) as clock:
        assert log_in(client).status_code == 302
        page = client.get("/admin/")
        assert page.status_code == 302 and page["Location"].startswith("/admin/otp/enrol/")
        enrol = client.get(page["Location"])
        html = enrol.content.decode()
        device = TOTPDevice.objects.get(user=user, confirmed=False)
        assert "otpauth://totp/" in html and "<svg" in html
        secret = re.search(r'id="otp-secret">([A-Z2-7]+)<', html)
        assert secret is not None and len(secret[1]) >= 32
        bad = client.post("/admin/otp/enrol/", {"token": "000000", "next": "/admin/"})
        assert bad.status_code == 200 and b"not valid" in bad.content
        clock.shift(dt.timedelta(seconds=5))  # django-otp's throttle after a failure
        device.refresh_from_db()
        good = client.post("/admin/otp/enrol/", {"token": code_of(device), "next": "/admin/"})
        assert good.status_code == 302 and good["Location"] == "/admin/"
        assert client.get("/admin/").status_code == 200
        device.refresh_from_db()
        assert device.confirmed

        # The next login asks for a code from that device.
        client.post("/admin/logout/")
        clock.shift(dt.timedelta(minutes=2))
        assert log_in(client).status_code == 302
        page = client.get("/admin/")
        assert page.status_code == 302 and page["Location"].startswith("/admin/otp/verify/")
        assert client.get("/admin/otp/enrol/")["Location"] == "/admin/otp/verify/"  # no 2nd
        wrong = client.post("/admin/otp/verify/", {"token": "123456"})
        assert wrong.status_code == 200 and b"not valid" in wrong.content
        assert client.get("/admin/").status_code == 302
        clock.shift(dt.timedelta(seconds=5))  # django-otp's throttle after a failure
        device.refresh_from_db()
        right = client.post("/admin/otp/verify/", {"token": code_of(device), "next": "/admin/"})
        assert right.status_code == 302 and right["Location"] == "/admin/"
        assert client.get("/admin/").status_code == 200


def test_the_recovery_command_removes_the_devices_so_the_user_enrols_again(
    settings: Any,
) -> None:
    settings.ADMIN_OTP_REQUIRED = True
    user = staff("ops", organizations=[])
    TOTPDevice.objects.create(user=user, name="admin", confirmed=True)
    out = StringIO()
    call_command("admin_recover", "ops", stdout=out)
    assert "removed 1 two-factor device(s)" in out.getvalue()
    assert "they enrol a new authenticator" in out.getvalue()
    assert not TOTPDevice.objects.filter(user=user).exists()
    client = Client()
    log_in(client)
    assert client.get("/admin/")["Location"].startswith("/admin/otp/enrol/")


def test_without_the_setting_a_password_is_enough_and_superusers_are_asked_too(
    settings: Any,
) -> None:
    staff("ops")
    client = Client()
    log_in(client)
    assert client.get("/admin/").status_code == 200  # ADMIN_OTP_REQUIRED off (tests/conftest)
    settings.ADMIN_OTP_REQUIRED = True
    root = User.objects.create_superuser("root", password=PASSWORD)
    other = Client()
    other.force_login(root)
    assert other.get("/admin/crm/contact/")["Location"].startswith("/admin/otp/enrol/")


def test_the_admin_session_cookie_is_secure_http_only_and_short_lived(settings: Any) -> None:
    staff("ops")
    client = Client()
    response = log_in(client)
    cookie = response.cookies[settings.SESSION_COOKIE_NAME]
    assert cookie["secure"] and cookie["httponly"]  # DEBUG is off here, as in production
    assert settings.SESSION_COOKIE_AGE <= 3600 and settings.SESSION_EXPIRE_AT_BROWSER_CLOSE
    assert client.session.get_expiry_age() <= 3600
