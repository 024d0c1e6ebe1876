"""DLQ growth alerts: mail to ADMINS and a Slack-compatible webhook, once per interval."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import pytest
import time_machine
from django.core import mail
from django.core.management import call_command

from core.models import Organization
from eventbus.operations.dlq_alerts import dlq_alerts_check
from tests.support.dlq import BROKEN, broken_consumer, make_dead
from tests.support.http_server import LoopbackServer, loopback_server

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 11, 2, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def alerting(settings: Any) -> Iterator[Any]:
    settings.ADMINS = [("ops@example.com", "ops@example.com")]
    settings.EVENTBUS = {
        **settings.EVENTBUS,
        "DLQ_ALERT_THRESHOLD": 3,
        "DLQ_ALERT_INTERVAL": 600,
        "DLQ_ALERT_WEBHOOK_URL": "",
    }
    yield settings


@pytest.fixture
def hook_server() -> Iterator[LoopbackServer]:
    with loopback_server() as server:
        yield server


def at(minutes: float) -> Any:
    return time_machine.travel(T0 + dt.timedelta(minutes=minutes), tick=False)


def test_alerts_admins_when_a_consumer_passes_the_threshold(
    alerting: Any, org: Organization
) -> None:
    with at(0):
        make_dead(org, 2)
        assert dlq_alerts_check() == []
        make_dead(org, 1)
        (growth,) = dlq_alerts_check()
    assert (growth.consumer, growth.died, growth.dlq_size) == ("flaky-worker", 3, 3)
    (message,) = mail.outbox
    assert message.to == ["ops@example.com"]
    assert "flaky-worker" in message.subject
    assert "flaky-worker: 3 died in the last 10 min, 3 in the DLQ" in message.body


def test_at_most_once_per_interval_per_consumer(alerting: Any, org: Organization) -> None:
    with broken_consumer():
        with at(0):
            make_dead(org, 3)
            assert [g.consumer for g in dlq_alerts_check()] == ["flaky-worker"]
        with at(5):
            make_dead(org, 3)
            make_dead(org, 3, event_type="test.job")
            # flaky-worker grew again but was alerted 5 minutes ago; broken-worker is new.
            assert [g.consumer for g in dlq_alerts_check()] == [BROKEN]
            assert dlq_alerts_check() == []
        with at(11):
            (again,) = dlq_alerts_check()  # one interval later, still growing (3 in the window)
    assert (again.consumer, again.died, again.dlq_size) == ("flaky-worker", 3, 6)
    assert len(mail.outbox) == 3


def test_old_deaths_are_not_growth(alerting: Any, org: Organization) -> None:
    with at(0):
        make_dead(org, 5)
    with at(30):
        assert dlq_alerts_check() == []  # a big but stable DLQ pages nobody
    assert mail.outbox == []


def test_webhook_gets_slack_compatible_json(
    alerting: Any, org: Organization, hook_server: LoopbackServer
) -> None:
    alerting.OUTBOUND_HTTP_ALLOW_PRIVATE = True  # loopback receiver in tests only
    alerting.EVENTBUS = {**alerting.EVENTBUS, "DLQ_ALERT_WEBHOOK_URL": hook_server.url("/slack")}
    with at(0):
        make_dead(org, 3)
        dlq_alerts_check()
    (request,) = hook_server.received
    assert (request.method, request.path) == ("POST", "/slack")
    assert request.headers["content-type"] == "application/json"
    text = json.loads(request.body)["text"]
    assert text.startswith("Dead-letter queue growing:") and "flaky-worker: 3 died" in text
    assert len(mail.outbox) == 1


def test_webhook_to_a_private_address_is_refused_and_mail_still_goes(
    alerting: Any, org: Organization, hook_server: LoopbackServer, caplog: Any
) -> None:
    alerting.OUTBOUND_HTTP_ALLOW_PRIVATE = False
    alerting.EVENTBUS = {**alerting.EVENTBUS, "DLQ_ALERT_WEBHOOK_URL": hook_server.url("/slack")}
    with at(0):
        make_dead(org, 3)
        assert len(dlq_alerts_check()) == 1
    assert hook_server.received == []
    assert len(mail.outbox) == 1
    assert "DLQ alert: webhook failed" in caplog.text
    assert hook_server.url("/slack") not in caplog.text  # the URL is a secret


def test_webhook_errors_are_logged_not_raised(
    alerting: Any, org: Organization, hook_server: LoopbackServer, caplog: Any
) -> None:
    from tests.support.http_server import Reply

    alerting.OUTBOUND_HTTP_ALLOW_PRIVATE = True
    hook_server.replies["/slack"] = Reply(500, b"boom")
    alerting.EVENTBUS = {**alerting.EVENTBUS, "DLQ_ALERT_WEBHOOK_URL": hook_server.url("/slack")}
    with at(0):
        make_dead(org, 3)
        assert len(dlq_alerts_check()) == 1
    assert "webhook answered HTTP 500" in caplog.text


def test_dead_letter_hook_checks_right_after_work_dies(alerting: Any, org: Organization) -> None:
    alerting.EVENTBUS = {
        **alerting.EVENTBUS,
        "DEAD_LETTER_HOOKS": ["eventbus.operations.dlq_alerts.on_dead_letters"],
    }
    with at(0):
        make_dead(org, 3)  # the worker's dead-letter hook runs the check
    assert len(mail.outbox) == 1


def test_command_reports_what_it_sent(alerting: Any, org: Organization, capsys: Any) -> None:
    with at(0):
        call_command("check_dlq_alerts")
        assert "no DLQ alert due" in capsys.readouterr().out
        make_dead(org, 4)
        call_command("check_dlq_alerts")
    assert "alerted: flaky-worker (4 died in the interval, 4 in the DLQ)" in capsys.readouterr().out


def test_the_dlq_webhook_equal_to_the_alert_webhook_gets_one_post(
    alerting: Any, org: Organization, hook_server: LoopbackServer
) -> None:
    """core.alerts posts every alert to ALERT_WEBHOOK_URL; the DLQ's own URL only adds a second
    destination when it is another one."""
    alerting.OUTBOUND_HTTP_ALLOW_PRIVATE = True
    alerting.ALERT_WEBHOOK_URL = hook_server.url("/slack")
    alerting.EVENTBUS = {**alerting.EVENTBUS, "DLQ_ALERT_WEBHOOK_URL": hook_server.url("/slack")}
    with at(0):
        make_dead(org, 3)
        dlq_alerts_check()
    (request,) = hook_server.received
    assert "flaky-worker: 3 died" in json.loads(request.body)["text"]
    assert len(mail.outbox) == 1
