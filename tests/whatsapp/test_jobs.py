"""The WhatsApp jobs, run as the scheduler and the cron endpoint run them (`job_run`, JobRun
records, cron events), against the fake WAHA, with time controlled by time-machine."""

from __future__ import annotations

import datetime as dt
import json
import urllib.request

import pytest
import time_machine
from django.utils import timezone

from crm.models import Conversation, Message
from crm.services import send_message
from eventbus.store.models import Delivery, EventLog
from jobs.models import JobRun
from jobs.registry import job_run, jobs
from tests.support.factories import ConversationFactory
from tests.support.waha import FakeWaha, Misbehaviour
from whatsapp.conf import SEND_CONSUMER
from whatsapp.models import WahaSession
from whatsapp.sending import send

pytestmark = pytest.mark.django_db(transaction=True)

ALERTS: list[tuple[str, dict[str, object]]] = []


def record_alert(subject: str, details: dict[str, object]) -> None:
    ALERTS.append((subject, details))


@pytest.fixture(autouse=True)
def _alerts(settings: object) -> None:
    ALERTS.clear()
    settings.ALERT_HOOKS = [f"{__name__}.record_alert"]  # type: ignore[attr-defined]


def changes() -> list[tuple[str, str]]:
    return [
        (e.payload["from_status"], e.payload["to_status"])
        for e in EventLog.objects.filter(event_type="system.session_changed").order_by("created_at")
    ]


def test_the_jobs_are_registered_with_their_schedules() -> None:
    assert jobs.get("sync-sessions").every == dt.timedelta(minutes=1)
    assert jobs.get("recover-stuck-messages").every == dt.timedelta(minutes=1)
    assert jobs.get("expire-24h-windows").every is not None


def test_sync_sessions_follows_waha_and_alerts_on_a_session_stuck_waiting_for_a_qr_scan(
    session: WahaSession, waha: FakeWaha
) -> None:
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        assert job_run(name="sync-sessions", trigger="test").rows_processed == 1
        assert changes() == []  # WORKING already
        waha.sessions["loja"] = "SCAN_QR_CODE"  # logged out: WAHA wants a new QR scan
        job_run(name="sync-sessions", trigger="test")
        session.refresh_from_db()
        assert session.status == "SCAN_QR_CODE" and session.last_sync_at == start
        assert changes() == [("WORKING", "SCAN_QR_CODE")]
        assert ALERTS == []  # not yet: it may be a scan under way

        clock.shift(dt.timedelta(minutes=6))
        job_run(name="sync-sessions", trigger="test")
        assert [subject for subject, _ in ALERTS] == ["WhatsApp session loja is SCAN_QR_CODE"]
        clock.shift(dt.timedelta(minutes=1))
        job_run(name="sync-sessions", trigger="test")
        assert len(ALERTS) == 1  # once per episode
        assert changes() == [("WORKING", "SCAN_QR_CODE")]

        waha.sessions["loja"] = "WORKING"
        job_run(name="sync-sessions", trigger="test")
        del waha.sessions["loja"]  # deleted on the WAHA side
        job_run(name="sync-sessions", trigger="test")
    assert sorted(changes()) == sorted(  # (one frozen instant: no order among them)
        [("WORKING", "SCAN_QR_CODE"), ("SCAN_QR_CODE", "WORKING"), ("WORKING", "MISSING")]
    )
    assert JobRun.objects.filter(job="sync-sessions", status="completed").count() == 6


def test_sync_sessions_keeps_the_status_and_records_the_error_when_waha_is_down(
    session: WahaSession, waha: FakeWaha
) -> None:
    waha.api_key = "rotated-elsewhere"  # pragma: allowlist secret  (WAHA now answers 401)
    job_run(name="sync-sessions", trigger="test")
    session.refresh_from_db()
    assert session.status == "WORKING" and "401" in session.last_sync_error
    assert changes() == []


def test_recover_stuck_messages_requeues_a_dead_send_and_fails_one_out_of_attempts(
    session: WahaSession, waha: FakeWaha, conversation: Conversation, settings: object
) -> None:
    settings.EVENTBUS = {**settings.EVENTBUS, "CONSUMER_MAX_ATTEMPTS": {SEND_CONSUMER: 1}}  # type: ignore[attr-defined]
    waha.fail_next(Misbehaviour(accept_then_drop=True))  # taken by WAHA, answer lost
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        stuck = send_message(conversation=conversation, body="Seu código: 1234")
        with pytest.raises(Exception, match="WAHA unreachable"):
            send(stuck.pk)  # the worker's attempt: lost answer, message left `sending`
        Delivery.objects.filter(consumer=SEND_CONSUMER).update(status="dead")  # out of attempts
        exhausted = send_message(conversation=conversation, body="Outra")
        Message.objects.filter(pk=exhausted.pk).update(status="sending", attempts=8)
        Delivery.objects.filter(consumer=SEND_CONSUMER).update(status="dead")
        fresh = send_message(conversation=conversation, body="Recente")
        Message.objects.filter(pk=fresh.pk).update(status="sending", attempts=1)
        Delivery.objects.filter(consumer=SEND_CONSUMER).update(status="dead")

        assert job_run(name="recover-stuck-messages", trigger="test").rows_processed == 0
        clock.shift(dt.timedelta(minutes=3))
        Message.objects.filter(pk=fresh.pk).update(updated_at=timezone.now())  # still recent
        result = job_run(name="recover-stuck-messages", trigger="test")
    assert result.status == "completed" and result.rows_processed == 2
    exhausted.refresh_from_db()
    assert exhausted.status == "failed" and exhausted.error_code == "stuck"
    requeued = EventLog.objects.filter(event_type="message.queued", entity_id=stuck.pk)
    assert requeued.count() == 2  # the original and the recovery's
    Delivery.objects.filter(consumer=SEND_CONSUMER, status="pending").update(
        next_attempt_at="2000-01-01T00:00Z"
    )
    from eventbus.dispatch.worker import Worker, WorkerOptions

    Worker(
        WorkerOptions(consumers=[SEND_CONSUMER], once=True, listen=False, startup_jitter=0)
    ).run()
    stuck.refresh_from_db()
    assert stuck.status == "sent"  # found in the chat: WAHA had taken it
    assert len(waha.sends()) == 1
    fresh.refresh_from_db()
    assert fresh.status == "sending"  # not stuck long enough: left alone


def test_expire_24h_windows_emits_once_per_closed_window(org: object) -> None:
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        closing = ConversationFactory(organization=org, last_inbound_at=start)
        ConversationFactory(organization=org, last_inbound_at=start + dt.timedelta(hours=2))
        clock.shift(dt.timedelta(hours=23, minutes=59))
        assert job_run(name="expire-24h-windows", trigger="test").rows_processed == 0
        clock.shift(dt.timedelta(minutes=2))
        job_run(name="expire-24h-windows", trigger="test")
        clock.shift(dt.timedelta(minutes=5))
        job_run(name="expire-24h-windows", trigger="test")
    (expired,) = EventLog.objects.filter(event_type="system.window_24h_expired")
    assert expired.payload == {
        "conversation_id": str(closing.pk),
        "contact_id": str(closing.contact_id),
        "expired_at": (start + dt.timedelta(hours=24)).isoformat(),
    }


def test_the_cron_endpoint_runs_sync_sessions(
    live_server: object, settings: object, session: WahaSession, waha: FakeWaha
) -> None:
    settings.INTERNAL_CRON_SECRET = "cron-secret-for-tests"  # type: ignore[attr-defined]  # pragma: allowlist secret
    waha.sessions["loja"] = "FAILED"
    request = urllib.request.Request(
        f"{live_server.url}/api/v1/cron/sync-sessions",  # type: ignore[attr-defined]
        data=b"",
        method="POST",
        headers={"Authorization": "Bearer cron-secret-for-tests"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.loads(response.read())
    assert response.status == 200 and answer["status"] == "completed"
    assert answer["rows_processed"] == 1
    session.refresh_from_db()
    assert session.status == "FAILED"
    assert JobRun.objects.filter(job="sync-sessions", trigger="http").count() == 1


def test_sync_sessions_alerts_on_a_session_stuck_starting(
    session: WahaSession, waha: FakeWaha
) -> None:
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        waha.sessions["loja"] = "STARTING"
        job_run(name="sync-sessions", trigger="test")
        assert ALERTS == []
        clock.shift(dt.timedelta(minutes=6))  # seed 001 A4: STARTING for more than 5 minutes
        job_run(name="sync-sessions", trigger="test")
    assert [subject for subject, _ in ALERTS] == ["WhatsApp session loja is STARTING"]


def test_the_integrations_health_job_checks_the_waha_sessions_too(
    session: WahaSession, waha: FakeWaha, settings: object
) -> None:
    settings.AI = {"MOCK": True}  # type: ignore[attr-defined]  # the provider's ping: tests/ai
    waha.sessions["loja"] = "FAILED"
    assert job_run(name="health-check-integrations", trigger="test").status == "completed"
    session.refresh_from_db()
    assert session.status == "FAILED" and session.last_sync_at is not None
    assert changes() == [("WORKING", "FAILED")]
