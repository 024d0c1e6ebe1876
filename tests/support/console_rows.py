"""Rows on every list of the admin console, with the long values that break a layout.

`fill(org)` makes realistic rows where the width of a list was a problem (events and
deliveries from a real emit and a real failing worker, audit entries with a long reason, job
runs with a long error, a subscription with a long URL, a WAHA session with a long sync error,
a consumer paused with a long reason),
then one plain row in every other model the admin lists and that has none yet, whatever the
model (tests/support/tenant_rows.py fills each required field with a plain value of its type).
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

from django.contrib import admin
from django.db import models
from django.utils import timezone

import eventbus
from core import audit, services
from core.models import Organization
from eventbus.store import pauses
from eventbus.store.models import Delivery
from jobs.models import JobRun
from pipelines.models import Execution, Pipeline
from tests.support.dlq import make_dead, webhook_dead_letter
from tests.support.tenant_rows import build

LONG_REASON = (
    "the customer's order sync failed for two hours while the warehouse ERP was down; "
    "reprocessing after the vendor confirmed the fix (ticket OPS-4821)"
)
LONG_ERROR = (
    "OperationalError: could not connect to server: Connection refused\n"
    "\tIs the server running on host 'erp.warehouse.internal' (10.0.0.12) and accepting "
    "TCP/IP connections on port 5432?"
)


def fill(org: Organization) -> None:
    """Rows in every model registered on the admin site (see the module docstring)."""
    _bus(org)
    _records(org)
    made: dict[type[models.Model], models.Model] = {Organization: org}
    for model in admin.site._registry:
        if not model._default_manager.exists():
            made[model] = build(model, org, made)


def _bus(org: Organization) -> None:
    webhook_dead_letter(
        org,
        description="Order sync to the warehouse ERP (production, São Paulo)",
        url="https://hooks.warehouse-erp.example.com/deskcomm/v2/orders/sync?tenant=acme-store-br",
    )
    make_dead(
        org,
        3,
        event_type="test.flaky",
        entity_kind="contact",
        entity_id=uuid.uuid4(),
        request_id=f"req-checkout-{uuid.uuid4().hex}",
        payload={"note": LONG_REASON},
    )
    eventbus.emit(
        "test.effect",
        organization=org,
        entity_kind="conversation",
        entity_id=uuid.uuid4(),
        payload={"n": 1},
    )
    pauses.pause(
        consumer="effect-b-worker",
        actor="user:operations.lead@acme-store.example.com",
        reason=LONG_REASON,
    )
    Delivery.objects.filter(status="pending").update(
        attempts=2, last_error=LONG_ERROR, next_attempt_at=timezone.now() + dt.timedelta(minutes=5)
    )


def _records(org: Organization) -> None:
    audit.record(
        actor="user:operations.lead@acme-store.example.com",
        action="delivery.reprocess",
        target_type="eventbus.delivery",
        target_id=Delivery.objects.values_list("pk", flat=True).first(),
        organization_id=org.pk,
        reason=LONG_REASON,
    )
    services.api_key_create(
        organization=org,
        name="ERP sync (warehouse, nightly full export and hourly deltas)",
        scopes_granted=["events:read", "events:write", "webhooks:read", "webhooks:write"],
        actor="user:ops",
    )
    now = timezone.now()
    JobRun.objects.create(
        job="process-pending-webhooks-and-retry-the-failed-deliveries",
        slot=now.isoformat(),
        trigger="schedule",
        status="failed",
        started_at=now,
        finished_at=now,
        duration_ms=183_224,
        rows_processed=1_234_567,
        error=LONG_ERROR,
    )
    pipeline = Pipeline.objects.create(
        organization=org,
        name="Order paid → ERP invoice → WhatsApp confirmation with tracking link",
        trigger="nuvemshop.order.paid",
    )
    Execution.objects.create(
        organization=org,
        pipeline=pipeline,
        trigger="nuvemshop.order.paid",
        status="failed",
        started_at=now,
        attempts=3,
        failed_node="http-post-erp-invoice-with-a-long-node-identifier",
    )
    from ai.models import AiUsageDaily

    AiUsageDaily.objects.create(
        organization=org,
        day=now.date() - dt.timedelta(days=1),
        spent_cents=Decimal("1234.5678"),
        budget_cents=50_000,
        calls=4321,
        tokens_in=1_234_567,
        tokens_out=765_432,
    )
    from whatsapp.models import WahaSession

    WahaSession.objects.create(
        organization=org,
        name="acme-store-sales-team-primary-number",
        base_url="https://waha.acme-store.example.com:3000",
        status="FAILED",
        status_changed_at=now,
        last_sync_at=now,
        last_sync_error=LONG_ERROR,
    )
    # A conversation handed to a person (the handoffs screen lists only those), with a long
    # notification text on the agents' list.
    from crm.conversation_models import AgentNotification
    from tests.support.factories import ConversationFactory

    handed_off = ConversationFactory(organization=org, bot_active=False, last_inbound_at=now)
    AgentNotification.objects.create(
        organization=org,
        kind=AgentNotification.Kind.HANDOFF,
        target_type="conversation",
        target_id=str(handed_off.pk),
        text=f"Conversation {str(handed_off.pk)[:8]} needs a person (human_requested).",
        source_event_id=uuid.uuid4(),
    )
