"""The LGPD consumers act only on their own organization's requests, and open a shop's request
only from the Nuvemshop receiver (issue 38)."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.utils import timezone

import eventbus
from core.models import Organization
from lgpd.handlers import EXPORT_CONSUMER, REDACT_CONSUMER, SHOP_REQUEST_CONSUMER
from lgpd.models import DataRequest
from tests.support.factories import ContactFactory
from tests.support.tenancy import assert_refused, drain

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("enforced")]


@pytest.mark.parametrize(
    ("kind", "consumer"), [("access", EXPORT_CONSUMER), ("redact", REDACT_CONSUMER)]
)
def test_a_request_of_another_tenant_is_never_exported_or_erased(
    kind: str,
    consumer: str,
    org: Organization,
    org_b: Organization,
    clock: time_machine.Coordinates,
) -> None:
    contact = ContactFactory(organization=org)
    request = DataRequest.objects.create(  # A's request, its own event not emitted here
        organization=org,
        contact=contact,
        kind=kind,
        channel=DataRequest.Channel.COMMAND,
        requested_by="test",
        received_at=timezone.now(),
    )
    attack = eventbus.emit(
        "lgpd.data_request_received",
        organization=org_b,
        entity_kind="lgpd_request",
        payload={
            "request_id": str(request.pk),
            "request_type": kind,
            "contact_id": str(contact.pk),
            "channel": "api",
        },
    )
    clock.shift(dt.timedelta(days=16))
    drain(consumer)
    assert_refused(attack, consumer, org_b)
    request.refresh_from_db()
    assert request.status == DataRequest.Status.RECEIVED
    assert (request.export_generated_at, request.redacted_at) == (None, None)


@pytest.mark.parametrize(
    "event_type", ["nuvemshop.customer_redact_received", "nuvemshop.customer_data_requested"]
)
def test_a_shop_request_not_from_the_receiver_is_refused(
    event_type: str, org: Organization
) -> None:
    contact = ContactFactory(organization=org)
    forged = eventbus.emit(
        event_type,
        organization=org,
        entity_kind="contact",
        payload={"ns_customer_id": 1, "ns_request_id": "1", "contact_id": str(contact.pk)},
    )
    drain(SHOP_REQUEST_CONSUMER)
    assert_refused(forged, SHOP_REQUEST_CONSUMER, org, action="security.provenance_refused")
    assert not DataRequest.objects.exists()
