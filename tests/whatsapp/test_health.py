"""The `waha` health check and the WhatsApp counters on /metrics."""

from __future__ import annotations

import pytest
from django.test import Client

from core.metrics import exposition
from crm.models import Conversation
from crm.services import send_message
from tests.support.waha import FakeWaha, Misbehaviour
from tests.whatsapp.test_sending import drain_once
from whatsapp.models import WahaSession

pytestmark = pytest.mark.django_db(transaction=True)


def health() -> tuple[int, dict[str, object]]:
    answer = Client().get("/api/v1/health")
    return answer.status_code, answer.json()


def test_no_session_no_waha_check(db: None) -> None:
    assert "waha" not in health()[1]["checks"]  # type: ignore[operator]


def test_the_waha_check_follows_the_sessions_and_is_not_required(
    session: WahaSession, waha: FakeWaha
) -> None:
    status, report = health()
    checks = report["checks"]
    assert isinstance(checks, dict)
    assert checks["waha"]["status"] == "ok" and checks["waha"]["required"] is False
    waha.sessions["loja"] = "SCAN_QR_CODE"
    status, report = health()
    checks = report["checks"]
    assert isinstance(checks, dict)
    assert checks["waha"] == {**checks["waha"], "status": "fail", "error": "SessionNotWorking"}
    assert (status, report["status"]) == (200, "ok")  # optional: the service stays up


def sample(name: str, label: str) -> float:
    for line in exposition().decode().splitlines():
        if line.startswith(f"{name}{{{label}}} "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_metrics_count_sends_by_outcome(
    session: WahaSession, waha: FakeWaha, conversation: Conversation
) -> None:
    sent = sample("deskcomm_whatsapp_sends_total", 'outcome="sent"')
    retried = sample("deskcomm_whatsapp_sends_total", 'outcome="retry"')
    waha.fail_next(Misbehaviour(status=500))
    send_message(conversation=conversation, body="Oi")
    drain_once()
    assert sample("deskcomm_whatsapp_sends_total", 'outcome="retry"') == retried + 1
    send_message(conversation=conversation, body="Oi de novo")
    drain_once()
    assert sample("deskcomm_whatsapp_sends_total", 'outcome="sent"') >= sent + 1
