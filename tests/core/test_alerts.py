"""core.alerts: every alert is mailed to ADMINS and posted to ALERT_WEBHOOK_URL (a real
loopback receiver), and production refuses to start with nowhere for alerts to go."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.core import mail

from core.alerts import alert
from core.checks import check_alert_destination
from tests.support.http_server import LoopbackServer, Reply, loopback_server

SLACK_URL = "https://hooks.slack.com/services/T0/B0/X"  # pragma: allowlist secret
PRODUCTION_KEY = "a-production-secret-key-" * 3  # long enough, not the development one


@pytest.fixture
def hook_server() -> Iterator[LoopbackServer]:
    with loopback_server() as server:
        yield server


def test_an_alert_is_mailed_to_admins_and_posted_to_the_webhook(
    settings: Any, hook_server: LoopbackServer
) -> None:
    settings.ADMINS = [("ops@example.com", "ops@example.com")]
    settings.OUTBOUND_HTTP_ALLOW_PRIVATE = True  # the loopback receiver, in tests only
    settings.ALERT_WEBHOOK_URL = hook_server.url("/slack")
    alert("cron job backup failed", job="backup", error="disk full")
    (message,) = mail.outbox
    assert message.to == ["ops@example.com"] and "cron job backup failed" in message.subject
    assert "job: backup" in message.body and "error: disk full" in message.body
    (request,) = hook_server.received
    assert (request.method, request.path) == ("POST", "/slack")
    assert json.loads(request.body)["text"] == message.body


def test_a_failing_webhook_is_logged_without_its_url_and_mail_still_goes(
    settings: Any, hook_server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    settings.ADMINS = [("ops@example.com", "ops@example.com")]
    settings.OUTBOUND_HTTP_ALLOW_PRIVATE = True
    hook_server.replies["/slack"] = Reply(500, b"boom")
    settings.ALERT_WEBHOOK_URL = hook_server.url("/slack")
    alert("restore check failed", text="the newest dump does not restore")
    assert len(mail.outbox) == 1 and mail.outbox[0].body == "the newest dump does not restore"
    assert "alert: webhook answered HTTP 500" in caplog.text
    assert hook_server.url("/slack") not in caplog.text  # the URL is a secret


def test_a_private_webhook_target_is_refused_in_production(
    settings: Any, hook_server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The one SSRF-guarded client (core.http): no loopback/private target unless allowed."""
    settings.OUTBOUND_HTTP_ALLOW_PRIVATE = False
    settings.ALERT_WEBHOOK_URL = hook_server.url("/slack")
    alert("DLQ growing")
    assert hook_server.received == []
    assert "alert: webhook failed" in caplog.text


def test_production_needs_an_alert_destination(settings: Any) -> None:
    """deskcomm.E010: ADMINS with a mail backend that delivers, or the webhook."""
    settings.DEBUG = False
    settings.SECRET_KEY = PRODUCTION_KEY
    settings.ALERT_WEBHOOK_URL = ""
    settings.ADMINS = []
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    assert [e.id for e in check_alert_destination()] == ["deskcomm.E010"]
    settings.ADMINS = [("ops@example.com", "ops@example.com")]
    assert check_alert_destination() == []
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"  # consolemail://
    (error,) = check_alert_destination()
    assert "console" in error.msg
    settings.ALERT_WEBHOOK_URL = (
        "https://hooks.slack.com/services/T0/B0/X"  # pragma: allowlist secret
    )
    assert check_alert_destination() == []
    settings.ALERT_WEBHOOK_URL = ""
    settings.DEBUG = True
    assert check_alert_destination() == []
