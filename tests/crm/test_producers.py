"""Every declared event type has a producer (issue 40): the lead producers are exercised here,
each in the same transaction as its row change; the catalog walk checks that every other type
names the test that sees its producer emit it, is pending (being built), or is removed with the
reason in docs/crm.md.

To add a producer: put its type in `EMITTED_ELSEWHERE` with the test file that exercises it and
asserts the event (that file must spell the type in quotes), and take it out of `PENDING`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction

from core.models import Organization
from crm import services
from crm.models import Lead
from eventbus.store import catalog
from eventbus.store.models import EventLog
from tests.support.admin import staff
from tests.support.factories import ContactFactory, LeadFactory

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]

# Types whose producers are being built: the walk accepts them for now. Whoever adds a producer
# moves its type to EMITTED_ELSEWHERE. Empty since issue 40's parts B and C.
PENDING: frozenset[str] = frozenset()
# Types removed from the product rather than produced: each needs its reason under
# "Removed event types" in docs/crm.md. None so far.
REMOVED: frozenset[str] = frozenset()
# Type -> a test that runs its producer and sees the event (the file spells the type in quotes).
EMITTED_ELSEWHERE = {
    "ai.budget_throttled": "tests/ai/test_budget.py",
    "ai.budget_warning": "tests/ai/test_workers_e2e.py",
    "ai.handoff_triggered": "tests/ai/test_responder.py",
    "ai.responded": "tests/ai/test_responder.py",
    "ai.sentiment_alert": "tests/ai/test_sentiment.py",
    "contact.anonymized": "tests/lgpd/test_redaction.py",
    "contact.blocked": "tests/whatsapp/test_views.py",
    "contact.created": "tests/crm/test_services.py",
    "contact.merged": "tests/crm/test_services.py",
    "conversation.assigned": "tests/crm/test_conversations.py",
    "conversation.opened": "tests/whatsapp/test_views.py",
    "conversation.reopened": "tests/crm/test_conversations.py",
    "conversation.resolved": "tests/crm/test_conversations.py",
    "conversation.sla_breached": "tests/crm/test_handlers.py",
    "cron.completed": "tests/jobs/test_cron.py",
    "cron.failed": "tests/jobs/test_cron.py",
    "cron.started": "tests/jobs/test_cron.py",
    "knowledge.article_changed": "tests/ai/test_admin.py",
    "lgpd.consent_changed": "tests/lgpd/test_export.py",
    "lgpd.data_request_received": "tests/lgpd/test_handlers.py",
    "lgpd.export_generated": "tests/lgpd/test_export.py",
    "lgpd.redact_applied": "tests/lgpd/test_redaction.py",
    "message.delivered": "tests/whatsapp/test_receipts.py",
    "message.failed": "tests/whatsapp/test_sending.py",
    "message.queued": "tests/crm/test_services.py",
    "message.read": "tests/whatsapp/test_receipts.py",
    "message.received": "tests/whatsapp/test_views.py",
    "message.sent": "tests/whatsapp/test_sending.py",
    "nuvemshop.cart_abandoned": "tests/nuvemshop/test_maintenance.py",
    "nuvemshop.customer_data_requested": "tests/nuvemshop/test_lgpd.py",
    "nuvemshop.customer_redact_received": "tests/lgpd/test_handlers.py",
    "nuvemshop.full_resync": "tests/nuvemshop/test_handlers.py",
    "nuvemshop.order_cancelled": "tests/nuvemshop/test_handlers.py",
    "nuvemshop.order_created": "tests/nuvemshop/test_handlers.py",
    "nuvemshop.order_fulfilled": "tests/nuvemshop/test_handlers.py",
    "nuvemshop.order_paid": "tests/nuvemshop/test_handlers.py",
    "nuvemshop.product_synced": "tests/nuvemshop/test_handlers.py",
    "nuvemshop.shop_redact_requested": "tests/nuvemshop/test_handlers.py",
    "nuvemshop.store_connected": "tests/nuvemshop/test_handlers.py",
    "nuvemshop.store_redact_received": "tests/nuvemshop/test_handlers.py",
    "nuvemshop.sync_page": "tests/nuvemshop/test_handlers.py",
    "nuvemshop.webhook_received": "tests/nuvemshop/test_handlers.py",
    "order.confirmed": "tests/pipelines/test_handlers_tenancy.py",
    "system.contact_blocked_by_stop": "tests/whatsapp/test_views.py",
    "system.send_blocked": "tests/whatsapp/test_sending.py",
    "system.session_changed": "tests/whatsapp/test_jobs.py",
    "system.window_24h_expired": "tests/whatsapp/test_jobs.py",
    "webhook.delivery_failed": "tests/webhooks/test_settle.py",
    "webhook.ping": "tests/webhooks/test_api.py",
    "webhook.subscription_disabled": "tests/webhooks/test_outcomes.py",
}


@pytest.fixture
def owner(org: Organization) -> User:
    return staff("seller", organizations=[org])


@pytest.fixture
def lead(org: Organization) -> Lead:
    """A lead written without its producer (the factory): the tests see only what they do."""
    return LeadFactory(organization=org, contact=ContactFactory(organization=org))


Act = Callable[[Lead, User], uuid.UUID]


def _created(lead: Lead, owner: User) -> uuid.UUID:
    made = services.lead_create(
        organization=lead.organization_id, name="Loja da Ana", source="web_form", owner_id=owner.pk
    )
    return made.pk


def _updated(lead: Lead, owner: User) -> uuid.UUID:
    return services.lead_update(lead, name="Loja da Ana (matriz)", value_cents=120_000).pk


def _stage_changed(lead: Lead, owner: User) -> uuid.UUID:
    return services.lead_change_stage(lead, stage_id="qualified").pk


def _won(lead: Lead, owner: User) -> uuid.UUID:
    return services.lead_mark_won(lead, value_cents=58_00, reason="signed").pk


def _lost(lead: Lead, owner: User) -> uuid.UUID:
    return services.lead_mark_lost(lead, reason="price").pk


def _assigned(lead: Lead, owner: User) -> uuid.UUID:
    return services.lead_assign(lead, owner_id=owner.pk).pk


def _deleted(lead: Lead, owner: User) -> uuid.UUID:
    return services.lead_delete(lead, actor=f"user:{owner.pk}").pk


def _activity(lead: Lead, owner: User) -> uuid.UUID:
    services.lead_activity_record(lead, kind="call", note="Ligou pedindo orçamento " * 20)
    return lead.pk


# Type -> the producer, run on a fresh lead; returns the lead the event is about.
PRODUCERS: dict[str, Act] = {
    "lead.created": _created,
    "lead.updated": _updated,
    "lead.stage_changed": _stage_changed,
    "lead.won": _won,
    "lead.lost": _lost,
    "lead.assigned": _assigned,
    "lead.deleted": _deleted,
    "lead_activity.recorded": _activity,
}
# What each producer's event says (beyond the catalog's required fields).
EXPECTED: dict[str, Callable[[dict[str, Any], User], bool]] = {
    "lead.created": lambda p, owner: p["owner_id"] == owner.pk and p["source"] == "web_form",
    "lead.updated": lambda p, owner: p["changes"]["value_cents"] == {"from": None, "to": 120_000},
    "lead.stage_changed": lambda p, owner: (
        (p["from_stage_id"], p["to_stage_id"]) == ("new", "qualified")
    ),
    "lead.won": lambda p, owner: (p["value"], p["reason"]) == (58_00, "signed"),
    "lead.lost": lambda p, owner: p["reason"] == "price",
    "lead.assigned": lambda p, owner: (p["from_owner_id"], p["to_owner_id"]) == (None, owner.pk),
    "lead.deleted": lambda p, owner: p == {"soft": True, "deleted_by": f"user:{owner.pk}"},
    "lead_activity.recorded": lambda p, owner: (
        p["activity_type"] == "call" and len(p["content_excerpt"]) == services.EXCERPT_CHARS
    ),
}


def project_types() -> list[str]:
    return [name for name in catalog.declared_types() if catalog.owner_of(name) != "tests"]


def lead_rows() -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM deskcomm_lead ORDER BY id")
        leads = cursor.fetchall()
        cursor.execute("SELECT * FROM deskcomm_leadactivity ORDER BY id")
        return [*leads, *cursor.fetchall()]


@pytest.mark.parametrize("event_type", sorted(PRODUCERS))
def test_each_lead_producer_emits_its_event(
    event_type: str, lead: Lead, owner: User, org: Organization
) -> None:
    about = PRODUCERS[event_type](lead, owner)
    [event] = EventLog.objects.filter(organization=org, event_type=event_type)
    assert (event.entity_kind, event.entity_id) == ("lead", about)
    assert set(catalog.latest(event_type).required) <= set(event.payload)
    assert EXPECTED[event_type](event.payload, owner), event.payload


@pytest.mark.parametrize("event_type", sorted(PRODUCERS))
def test_each_lead_producers_event_rolls_back_with_its_change(
    event_type: str, lead: Lead, owner: User, org: Organization
) -> None:
    before = lead_rows()
    with pytest.raises(RuntimeError), transaction.atomic():
        PRODUCERS[event_type](lead, owner)
        assert EventLog.objects.filter(event_type=event_type).exists()
        raise RuntimeError("the caller's transaction fails after the change")
    assert lead_rows() == before
    assert not EventLog.objects.filter(event_type=event_type).exists()


def test_a_closed_lead_cannot_be_closed_again(lead: Lead) -> None:
    services.lead_mark_won(lead)
    with pytest.raises(services.LeadClosed, match="already won"):
        services.lead_mark_lost(lead, reason="late")
    services.lead_delete(lead, actor="test")
    with pytest.raises(services.LeadClosed):
        services.lead_change_stage(lead, stage_id="qualified")
    assert lead.status == "won"
    assert list(
        EventLog.objects.filter(entity_id=lead.pk).values_list("event_type", flat=True)
    ) == ["lead.won", "lead.deleted"]


def test_one_update_reports_only_what_changed_and_each_kind_once(lead: Lead, owner: User) -> None:
    services.lead_update(lead, name=lead.name)  # nothing changes: nothing emitted
    services.lead_update(lead, source="import", pipeline_id="b2b")
    events = EventLog.objects.filter(entity_id=lead.pk)
    [updated] = events
    assert updated.payload == {
        "changes": {
            "source": {"from": "manual", "to": "import"},
            "pipeline_id": {"from": "default", "to": "b2b"},
        }
    }
    assert updated.metadata["provenance"]["component"] == "trigger:lead_updated_emit"


def test_an_owner_of_another_organization_is_refused(
    lead: Lead, org_b: Organization, owner: User
) -> None:
    outsider = staff("outsider", organizations=[org_b])
    with pytest.raises(services.LeadError) as refused:
        services.lead_assign(lead, owner_id=outsider.pk)
    assert refused.value.field == "owner_id"
    with pytest.raises(services.LeadError):
        services.lead_create(organization=org_b, name="x", contact=lead.contact)
    assert not EventLog.objects.exists()


# -- the catalog walk -----------------------------------------------------------------------------


def test_every_declared_type_has_a_producer_or_is_pending_or_removed() -> None:
    accounted = set(PRODUCERS) | set(EMITTED_ELSEWHERE) | PENDING | REMOVED
    missing = sorted(set(project_types()) - accounted)
    assert not missing, f"declared but produced nowhere (add a producer and its test): {missing}"


def test_the_walks_lists_name_only_declared_types_and_each_once() -> None:
    lists = [set(PRODUCERS), set(EMITTED_ELSEWHERE), set(PENDING), set(REMOVED)]
    declared = set(project_types())
    for names in lists:
        assert names <= declared, names - declared
    for i, names in enumerate(lists):
        for other in lists[i + 1 :]:
            assert not names & other, names & other


@pytest.mark.parametrize("event_type", sorted(EMITTED_ELSEWHERE))
def test_each_producer_elsewhere_has_a_test_that_sees_its_event(event_type: str) -> None:
    path = REPO / EMITTED_ELSEWHERE[event_type]
    assert path.is_file(), path
    assert f'"{event_type}"' in path.read_text(), f"{path} does not mention {event_type}"


def test_each_removed_type_has_its_reason_in_the_docs() -> None:
    docs = (REPO / "docs" / "crm.md").read_text()
    for event_type in REMOVED:
        assert f"`{event_type}`" in docs.split("## Removed event types", 1)[-1], event_type
