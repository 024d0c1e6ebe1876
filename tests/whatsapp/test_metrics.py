"""The WhatsApp metrics: send latency against the fake WAHA (the seed's p95 < 1.5 s SLO) and the
sessions' status gauges behind alerts A3 and A4."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from prometheus_client import REGISTRY

from core.models import Organization
from crm.models import Conversation
from crm.services import send_message
from eventbus.dispatch.worker import Worker, WorkerOptions
from tests.support.factories import OrganizationFactory
from tests.support.waha import FakeWaha, Misbehaviour
from whatsapp.conf import SEND_CONSUMER
from whatsapp.metrics import SessionsCollector
from whatsapp.models import WahaSession

SENDS = "deskcomm_whatsapp_send_duration_seconds"


def observed(outcome: str) -> tuple[float, float]:
    """(count, sum of seconds) of the send histogram for `outcome`."""
    labels = {"outcome": outcome}
    count = REGISTRY.get_sample_value(f"{SENDS}_count", labels) or 0.0
    return count, REGISTRY.get_sample_value(f"{SENDS}_sum", labels) or 0.0


def drain_once() -> None:
    Worker(
        WorkerOptions(consumers=[SEND_CONSUMER], once=True, listen=False, startup_jitter=0)
    ).run()


@pytest.mark.django_db(transaction=True)
def test_each_send_call_is_timed_by_outcome(
    session: WahaSession, waha: FakeWaha, conversation: Conversation
) -> None:
    sent, failed = observed("sent"), observed("error")
    send_message(conversation=conversation, body="Olá!")
    drain_once()
    assert observed("sent")[0] == sent[0] + 1 and observed("error") == failed
    waha.fail_next(Misbehaviour(status=500, delay=0.2))
    send_message(conversation=conversation, body="De novo")  # its retry waits: one call
    drain_once()
    after = observed("error")
    assert after[0] == failed[0] + 1
    assert after[1] - failed[1] >= 0.2  # WAHA's delay is in the time


def gauges() -> tuple[dict[str, float], float]:
    by_status, starting = SessionsCollector().collect()
    (age,) = starting.samples
    return {s.labels["status"]: s.value for s in by_status.samples}, age.value


@pytest.mark.django_db
def test_sessions_are_counted_by_status_and_the_longest_starting_one_is_timed(
    org: Organization,
) -> None:
    assert gauges()[1] == 0
    now = timezone.now()
    other = OrganizationFactory()
    WahaSession.objects.create(organization=org, name="a", status="WORKING")
    WahaSession.objects.create(
        organization=other,
        name="b",
        status="STARTING",
        status_changed_at=now - dt.timedelta(minutes=7),
    )
    WahaSession.objects.create(
        organization=other,
        name="c",
        status="STARTING",
        status_changed_at=now - dt.timedelta(minutes=1),
        is_default=False,
    )
    statuses, starting = gauges()
    assert statuses["WORKING"] == 1 and statuses["STARTING"] == 2 and statuses["FAILED"] == 0
    assert 7 * 60 <= starting < 8 * 60  # the oldest one: A4 fires past 5 minutes
