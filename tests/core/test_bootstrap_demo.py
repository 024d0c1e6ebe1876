"""`bootstrap_demo` creates the demo organization and an admin user, idempotently."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import AbstractBaseUser
from django.core.management import call_command
from django.test import RequestFactory

from core.models import SYSTEM_ORGANIZATION_ID, Organization

pytestmark = pytest.mark.django_db


def log_in(password: str) -> AbstractBaseUser | None:
    """The admin login's check (the lockout backend needs the request it would come with)."""
    request = RequestFactory().post("/admin/login/")
    return authenticate(request, username="admin", password=password)


def run(*args: str) -> str:
    out = StringIO()
    call_command("bootstrap_demo", *args, stdout=out)
    return out.getvalue()


def test_creates_org_and_admin_and_prints_credentials() -> None:
    text = run()
    password = re.search(r"login:\s+admin / (\S+)", text)
    assert password, text
    assert log_in(password.group(1)) is not None
    assert Organization.objects.filter(slug="demo").count() == 1
    assert "http://127.0.0.1:8000/admin/" in text


def test_second_run_keeps_the_password_unless_asked() -> None:
    first = re.search(r"admin / (\S+)", run()).group(1)  # type: ignore[union-attr]
    assert "existing user" in run()
    assert log_in(first) is not None
    second = re.search(r"admin / (\S+)", run("--reset-password")).group(1)  # type: ignore[union-attr]
    assert log_in(second) is not None
    # The system organization (owner of cron.* events) comes from a data migration.
    assert Organization.objects.exclude(pk=SYSTEM_ORGANIZATION_ID).count() == 1


def test_the_password_hint_is_the_whole_command() -> None:
    command = "python3 -m dev manage bootstrap_demo --reset-password"
    assert f"a new one: {command})" in run()
    assert f"a new one: {command})" in run()  # the existing user
    assert f"a new one: {command} --username ana)" in run("--username", "ana")
