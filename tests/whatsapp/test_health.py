"""The `waha` health check and the WhatsApp counters on /metrics."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from core.metrics import exposition
from crm.models import Conversation
from crm.services import send_message
from tests.support.factories import ConversationFactory
from tests.support.waha import FakeWaha, Misbehaviour
from tests.whatsapp.conftest import API_KEY
from tests.whatsapp.test_sending import drain_once
from whatsapp.models import WahaSession

pytestmark = pytest.mark.django_db(transaction=True)


def health() -> tuple[int, dict[str, object]]:
    answer = Client().get("/api/v1/health")
    return answer.status_code, answer.json()


def waha_checks(report: dict[str, object]) -> dict[str, dict[str, object]]:
    checks = report["checks"]
    assert isinstance(checks, dict)
    return {name: check for name, check in checks.items() if name.startswith("waha")}


def test_no_session_no_waha_check(db: None) -> None:
    assert waha_checks(health()[1]) == {}


@pytest.mark.usefixtures("unhurried")
def test_one_waha_check_per_session_not_required_and_named_by_id(
    session: WahaSession, waha: FakeWaha
) -> None:
    other = WahaSession(
        organization=session.organization, name="filial", base_url=waha.url, is_default=False
    )
    other.api_key = API_KEY
    other.save()
    waha.sessions["filial"] = "WORKING"
    status, report = health()
    checks = waha_checks(report)
    assert set(checks) == {f"waha:{session.pk}", f"waha:{other.pk}"}
    assert {c["status"] for c in checks.values()} == {"ok"}
    assert {c["required"] for c in checks.values()} == {False}

    waha.sessions["loja"] = "SCAN_QR_CODE"
    status, report = health()
    checks = waha_checks(report)
    failed = checks[f"waha:{session.pk}"]
    assert (failed["status"], failed["error"]) == ("fail", "SessionNotWorking")
    assert checks[f"waha:{other.pk}"]["status"] == "ok"  # one session's trouble is its own
    assert (status, report["status"]) == (200, "ok")  # optional: the service stays up
    assert "loja" not in str(report)  # the unauthenticated answer names no session


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
    # Another conversation: the sender is ordered per conversation, so this one's next message
    # waits for the retry of its first.
    other = ConversationFactory(
        organization=conversation.organization,
        external_chat_id="5511977776666@c.us",
        last_inbound_at=timezone.now(),
    )
    send_message(conversation=other, body="Oi de novo")
    drain_once()
    assert sample("deskcomm_whatsapp_sends_total", 'outcome="sent"') >= sent + 1
