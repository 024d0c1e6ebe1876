"""The AI consumers never answer, classify or index another organization's rows (issue 38)."""

from __future__ import annotations

import pytest

import eventbus
from ai.models import Chunk
from core.models import Organization
from crm.models import Message
from tests.support.factories import LeadFactory, MessageFactory
from tests.support.tenancy import assert_refused, drain, message_ids

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("enforced")]


@pytest.mark.parametrize("consumer", ["ai-response-worker", "ai-sentiment-worker"])
def test_an_inbound_message_of_another_tenant_is_refused(
    consumer: str, org: Organization, org_b: Organization
) -> None:
    inbound = MessageFactory(organization=org, direction=Message.Direction.INBOUND)
    attack = eventbus.emit(
        "message.received",
        organization=org_b,
        entity_kind="message",
        payload={
            **message_ids(inbound),
            "direction": "inbound",
            "channel": "whatsapp",
            "waha_message_id": "x",
        },
    )
    drain(consumer)
    assert_refused(attack, consumer, org_b)
    inbound.refresh_from_db()
    assert inbound.sentiment in ("", None)
    assert not Message.objects.filter(organization=org_b).exists()


def test_the_indexer_refuses_another_tenants_lead(org: Organization, org_b: Organization) -> None:
    lead = LeadFactory(organization=org)
    attack = eventbus.emit(
        "lead.updated",
        organization=org_b,
        entity_kind="lead",
        entity_id=lead.pk,
        payload={"changes": {"name": "x"}},
    )
    drain("rag-indexer-worker")
    assert_refused(attack, "rag-indexer-worker", org_b)
    assert not Chunk.objects.exists()
