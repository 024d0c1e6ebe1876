"""Errors a console user meets: a mistyped list parameter answers a short 400 page that says
what was wrong and links the list without it (one log line, no traceback, no technical page
even under DEBUG); `/favicon.ico` is served."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("ops"))
    return client


@pytest.mark.parametrize(
    ("path", "query", "name", "without"),
    [
        ("/admin/eventbus/eventlog/", "cron=shown&o=1", "cron", "o=1"),
        ("/admin/jobs/jobrun/", "status=failed&jb=x", "jb", "status=failed"),
        ("/admin/eventbus/eventlog/", "payload__icontains=x", "payload__icontains", ""),
    ],
)
def test_a_mistyped_list_parameter_answers_a_short_400_and_logs_one_line(
    ops: Client,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
    path: str,
    query: str,
    name: str,
    without: str,
) -> None:
    settings.DEBUG = True  # as in a local `run`: still no technical page
    with caplog.at_level(logging.INFO):
        response = ops.get(f"{path}?{query}")
    assert response.status_code == 400
    html = response.content.decode()
    assert len(html) < 40_000  # an admin page (Django's technical 400 page: 160 KB)
    assert f"has no filter named <code>{name}</code>" in html
    link = f"{path}?{without}" if without else path
    assert f'href="{link}" id="without-unknown-filter"' in html
    noted = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(noted) == 1, [r.getMessage() for r in noted]
    assert noted[0].exc_info is None and name in noted[0].getMessage()
    assert ops.get(link).status_code == 200


def test_the_favicon_is_served_and_every_admin_page_names_it(ops: Client) -> None:
    response = Client().get("/favicon.ico")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/x-icon"
    assert response.content[:4] == b"\x00\x00\x01\x00"  # an ICO file's header
    assert "max-age=86400" in response["Cache-Control"]
    for page in ("/admin/", "/admin/eventbus/eventlog/", "/admin/ops/status/"):
        assert '<link rel="icon" href="/favicon.ico"' in ops.get(page).content.decode(), page
