"""Correlation view: everything one request id caused, in time order."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.test import Client
from django.urls import reverse

from core.models import Organization
from eventbus.admin import selectors
from tests.support.admin import DLQ_OPERATOR, staff
from tests.support.dlq import make_dead

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 11, 2, 12, 0, tzinfo=dt.UTC)
CORRELATION = reverse("eventbus_ops:correlation")
DLQ = reverse("admin:eventbus_deadletter_changelist")


@pytest.fixture
def operator(client: Client) -> Client:
    client.force_login(staff("ops", *DLQ_OPERATOR, "eventbus.view_eventlog", "core.view_auditlog"))
    return client


def test_audit_events_deliveries_and_attempts_in_time_order(
    operator: Client, org: Organization
) -> None:
    with time_machine.travel(T0, tick=False):
        (dead,) = make_dead(org, 1, request_id="req-corr-1")
    with time_machine.travel(T0 + dt.timedelta(minutes=5), tick=False):
        operator.post(
            DLQ,
            {"action": "reprocess_selected", "index": 0, "_selected_action": [dead.pk]},
            HTTP_X_REQUEST_ID="req-corr-1",  # the operator's request joins the same trail
        )
    found = selectors.correlation("req-corr-1")
    assert [(e.kind, e.at) for e in found.entries] == [
        ("event", T0),
        ("attempt", T0),
        ("audit", T0 + dt.timedelta(minutes=5)),
        ("delivery", T0 + dt.timedelta(minutes=5)),  # pending again since the reprocess
    ]
    html = operator.get(f"{CORRELATION}?request_id=req-corr-1").content.decode()
    for text in ("test.flaky", "user:ops", "delivery.reprocess", "flaky-worker always fails"):
        assert text in html
    assert reverse("admin:eventbus_eventlog_change", args=[dead.event_id]) in html
    assert reverse("admin:eventbus_delivery_change", args=[dead.pk]) in html


def test_audit_is_hidden_without_the_audit_permission(client: Client, org: Organization) -> None:
    make_dead(org, 1, request_id="req-corr-2")
    ops = staff("ops2", *DLQ_OPERATOR, "eventbus.view_eventlog")
    client.force_login(ops)
    dead = selectors.dead_letters().get()
    client.post(
        DLQ,
        {"action": "reprocess_selected", "index": 0, "_selected_action": [dead.pk]},
        HTTP_X_REQUEST_ID="req-corr-2",
    )
    html = client.get(f"{CORRELATION}?request_id=req-corr-2").content.decode()
    assert "delivery.reprocess" not in html
    assert "you do not have permission to view the audit log" in html
    assert "test.flaky" in html


def test_values_are_escaped(operator: Client, org: Organization) -> None:
    make_dead(org, 1, request_id="req-corr-3", entity_kind="<b>kind</b>")
    html = operator.get(f"{CORRELATION}?request_id=req-corr-3").content.decode()
    assert "<b>kind</b>" not in html and "&lt;b&gt;kind&lt;/b&gt;" in html


def test_bad_input_is_a_form_error_not_a_500(operator: Client) -> None:
    assert "Show timeline" in operator.get(CORRELATION).content.decode()
    too_long = operator.get(f"{CORRELATION}?request_id={'x' * 300}")
    assert too_long.status_code == 200
    assert "Ensure this value has at most 100 characters" in too_long.content.decode()
    empty = operator.get(f"{CORRELATION}?request_id=")
    assert empty.status_code == 200 and "This field is required." in empty.content.decode()
    unknown = operator.get(f"{CORRELATION}?request_id=nobody-sent-this")
    assert "Nothing recorded for this request id." in unknown.content.decode()


def test_needs_the_event_view_permission(client: Client) -> None:
    client.force_login(staff("nobody"))
    assert client.get(CORRELATION).status_code == 403
