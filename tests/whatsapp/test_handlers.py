"""whatsapp-send-worker never sends another organization's message (issue 38)."""

from __future__ import annotations

import pytest

import eventbus
from core.models import Organization
from crm.models import Message
from tests.support.factories import MessageFactory
from tests.support.tenancy import assert_refused, drain, message_ids
from whatsapp.conf import SEND_CONSUMER

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("enforced")]


def test_message_queued_naming_another_tenants_message_is_refused(
    org: Organization, org_b: Organization
) -> None:
    queued = MessageFactory(
        organization=org, direction=Message.Direction.OUTBOUND, status=Message.Status.QUEUED
    )
    attack = eventbus.emit(
        "message.queued",
        organization=org_b,
        entity_kind="message",
        payload={**message_ids(queued), "channel": "whatsapp"},
    )
    drain(SEND_CONSUMER)
    assert_refused(attack, SEND_CONSUMER, org_b)
    queued.refresh_from_db()
    assert queued.status == Message.Status.QUEUED and not queued.external_id
