"""A failed handler's traceback, per attempt: recorded by the nack, bounded and redacted, shown
collapsed with the innermost frame's file:line on the DLQ letter and the delivery pages
(issue 44, item 5)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator

import pytest
import time_machine
from django.test import Client
from django.urls import reverse
from django.utils import timezone

import eventbus
from core.models import Organization
from eventbus.store import tracebacks
from eventbus.store.models import Delivery, DeliveryAttempt
from tests.support.admin import DLQ_OPERATOR, staff
from tests.support.dlq import (
    TRACED_EMAIL,
    TRACED_RAISE_LINE,
    TRACED_SECRET,
    fail_traced,
    traced_consumer,
)

pytestmark = pytest.mark.django_db

SECRET, EMAIL, RAISE_LINE = TRACED_SECRET, TRACED_EMAIL, TRACED_RAISE_LINE


@pytest.fixture
def traced() -> Iterator[None]:
    with traced_consumer():
        yield


def fail(org: Organization, *, attempts: int, **payload: object) -> Delivery:
    return fail_traced(org, attempts=attempts, **payload)


def test_every_failed_attempt_keeps_its_redacted_traceback(org: Organization, traced: None) -> None:
    delivery = fail(org, attempts=2)
    assert delivery.status == "dead"
    attempts = list(DeliveryAttempt.objects.filter(delivery=delivery).order_by("attempt"))
    assert [a.outcome for a in attempts] == ["retry", "dead"]
    for attempt in attempts:
        text = attempt.traceback or ""
        assert text.startswith("Traceback (most recent call last):")
        assert f'dlq.py", line {RAISE_LINE}, in call_the_crm' in text
        assert "in sync_order" in text
        assert SECRET not in text and EMAIL not in text
        assert "[REDACTED]" in text and "[EMAIL]" in text
        assert attempt.error == "ConnectionError: crm refused [REDACTED] for [EMAIL] (n=7)"
        frame = tracebacks.last_frame(text)
        assert frame is not None and frame.where == f"dlq.py:{RAISE_LINE}"
        assert frame.function == "call_the_crm"


def test_a_huge_traceback_is_cut_keeping_its_head_and_tail(org: Organization, traced: None) -> None:
    delivery = fail(org, attempts=1, huge=True)
    (attempt,) = DeliveryAttempt.objects.filter(delivery=delivery)
    text = attempt.traceback or ""
    assert len(text) <= tracebacks.MAX_CHARS + 60
    assert text.startswith("Traceback (most recent call last):")
    assert re.search(r"\.\.\. \d+ characters cut \.\.\.", text)
    assert text.rstrip().endswith("x" * 100)  # the exception's own line is at the end


def test_nothing_raised_records_no_traceback() -> None:
    assert tracebacks.capture(RuntimeError("made up by a watchdog, never raised")) == ""
    assert tracebacks.last_frame("no frames here") is None


def test_the_letter_and_delivery_pages_show_it_collapsed_with_file_and_line(
    client: Client, org: Organization, traced: None
) -> None:
    client.force_login(staff("ops", *DLQ_OPERATOR, "eventbus.view_delivery"))
    delivery = fail(org, attempts=2)
    where = f"dlq.py:{RAISE_LINE}"
    for url in (
        reverse("admin:eventbus_deadletter_change", args=[delivery.pk]),
        reverse("admin:eventbus_delivery_change", args=[delivery.pk]),
    ):
        html = client.get(url).content.decode()
        blocks = re.findall(r'<details class="dc-trace"><summary>(.*?)</summary>', html)
        assert blocks, url
        assert all(where in summary and "call_the_crm" in summary for summary in blocks), url
        shown = re.findall(r'<details class="dc-trace">.*?</details>', html, re.S)
        assert all("Traceback (most recent call last):" in block for block in shown)
        assert SECRET not in html and EMAIL not in html  # the error text is redacted too
    letter = client.get(reverse("admin:eventbus_deadletter_change", args=[delivery.pk]))
    # The last attempt's in the letter's fields, and each attempt's in its history.
    assert letter.content.decode().count('<details class="dc-trace">') == 3


def test_a_lease_that_ran_out_records_no_traceback(org: Organization) -> None:
    from eventbus.dispatch import claim as claims

    event = eventbus.emit("test.flaky", organization=org, entity_kind="thing", payload={"n": 1})
    claimed = claims.claim(consumers=["flaky-worker"], batch_size=1, worker_id="w")
    assert [e.id for e in claimed.events] == [event.pk]
    with time_machine.travel(timezone.now() + dt.timedelta(hours=1)):
        claims.reap()
    (attempt,) = DeliveryAttempt.objects.filter(delivery__event_id=event.pk)
    assert attempt.error_class == "LeaseExpired" and attempt.traceback is None
