"""CRM write services: each writes its records and emits its event in one transaction.

- `contact_resolve`: the one door to a contact for the channels and the shop: the contact an
  identifier (phone, e-mail, CPF, WhatsApp lid, shop customer) belongs to, or a new one with
  `contact.created`; race-free through `ContactIdentity`'s unique key (see its doc).
- `contact_create`, `contact_update`, `contact_merge` (`contact.merged`), `contact_block`
  (`contact.blocked`), `contact_unblock` (audited): the API's and the admin's writes.
- `conversation_for`: the contact's conversation on a channel, opened once (`conversation.opened`).
- `order_confirm`: an order and `order.confirmed` (seed 004).
- `send_message`: an outbound message (`queued`) and `message.queued`, which the channel's send
  worker consumes (seed 000 §6.1); the worker, not this function, checks the send blockers.
  `send_refusal` asks the channel (its registered `send_check`) before queueing, for callers
  that must answer at once (the API).
- leads (seed 000 §3): `lead_create` emits `lead.created`; the other `lead.*` events come from
  the database (crm/migrations/0009): `lead_update`, `lead_change_stage`, `lead_assign` and
  `lead_delete` change the row and its triggers emit, `lead_mark_won`/`lead_mark_lost` call the
  SQL functions `mark_lead_won`/`mark_lead_lost`. `lead_activity_record` writes an activity and
  `lead_activity.recorded`. Every write is one transaction with its event.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psycopg.errors
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection, transaction
from django.db.models import Q
from django.utils import timezone

import eventbus
from core import audit
from core.models import Organization, StaffOrganization
from crm.identity import Identity, contact_identities, identities
from crm.models import (
    ConsentRecord,
    Contact,
    ContactIdentity,
    Conversation,
    Lead,
    LeadActivity,
    Message,
    Order,
)
from crm.selectors import match_contact

logger = logging.getLogger(__name__)

# What `lead_update` may change (the stage, owner, closing and deletion have their own services).
LEAD_FIELDS = ("name", "source", "pipeline_id", "contact", "value_cents")
EXCERPT_CHARS = 140  # lead_activity.recorded's content_excerpt
KIND_CHARS = 32  # LeadActivity.kind
# A channel's check before a message is queued: why it would be refused, or None.
SendCheck = Callable[[Conversation, bool], "str | None"]
_send_checks: dict[str, SendCheck] = {}


class LeadError(ValueError):
    """A lead write refused: bad input (`field` names it) or a lead not in a state for it."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class LeadClosed(LeadError):
    """The lead is already won or lost (or deleted): it cannot be closed or changed again."""


# A new contact loses its keys to a concurrent one at most this often before it is found.
CLAIM_ATTEMPTS = 5
CLAIM_SQL = (
    "INSERT INTO crm_contactidentity (organization_id, contact_id, kind, value, created_at) "
    "VALUES {rows} ON CONFLICT (organization_id, kind, value) DO NOTHING RETURNING kind, value"
)
# The fields a merge fills on the surviving contact when it has none.
MERGED_FIELDS = ("name", "phone", "email", "cpf")


class ContactConflict(ValueError):
    """A contact write refused for its state (merging a contact into itself, an anonymized or
    already-merged contact, another organization's contact, an identifier another contact
    holds)."""


def contact_resolve(
    *,
    organization_id: uuid.UUID,
    phone: str = "",
    email: str = "",
    whatsapp_chat_id: str = "",
    nuvemshop_customer: str = "",
    cpf: str = "",
    name: str = "",
    source: str,
) -> tuple[Contact, bool]:
    """The organization's contact for these identifiers, or a new one; (contact, created).

    The strongest identifier that has an owner decides (channel ids, e-mail, CPF, phone:
    crm.identity), else a contact whose own fields match (crm.selectors.match_contact: one
    written before identities existed). The contact also gets the identifiers no one holds and
    the fields it lacks (name, phone, e-mail). A new contact and `contact.created` are written
    only when it claimed every identifier (INSERT ... ON CONFLICT DO NOTHING, in a savepoint):
    a concurrent request that claimed one first wins, and this one then finds its contact.
    Raises ValueError when no identifier is usable.
    """
    keys = identities(
        phone=phone,
        email=email,
        whatsapp_chat_id=whatsapp_chat_id,
        nuvemshop_customer=nuvemshop_customer,
        cpf=cpf,
    )
    if not keys:
        raise ValueError("a contact needs a phone, an e-mail or a channel id")
    given = {
        "name": name.strip()[:200],
        "phone": _phone_field(phone, keys),
        "email": email.strip()[:254],
    }
    with transaction.atomic():
        for _attempt in range(CLAIM_ATTEMPTS):
            found = _owner(organization_id, keys) or match_contact(
                organization_id=organization_id, email=email, phone=given["phone"], cpf=cpf
            )  # a contact written before its identities (or by hand), matched by its fields
            if found is not None:
                _claim(found, keys)
                _fill_blanks(found, given)
                return found, False
            try:
                with transaction.atomic():
                    contact = Contact(organization_id=organization_id, **given)
                    if cpf:
                        contact.cpf = cpf
                    contact.save()
                    if len(_claim(contact, keys)) < len(keys):
                        raise _Lost
                    _created_emit(contact, source)
                    return contact, True
            except _Lost:
                continue
    raise RuntimeError("contact_resolve: the identifiers kept changing owner; try again")


class _Lost(Exception):
    """A concurrent request claimed one of the new contact's identifiers first."""


def _phone_field(phone: str, keys: Sequence[Identity]) -> str:
    if phone.strip():
        return phone.strip()[:32]
    return next((k.value for k in keys if k.kind == ContactIdentity.Kind.PHONE), "")


def _owner(organization_id: uuid.UUID, keys: Sequence[Identity]) -> Contact | None:
    """The contact holding the strongest of `keys` (a committed row: READ COMMITTED)."""
    match = Q()
    for key in keys:
        match |= Q(kind=key.kind, value=key.value)
    held = {
        Identity(row.kind, row.value): row.contact
        for row in ContactIdentity.objects.filter(
            match, organization_id=organization_id
        ).select_related("contact")
    }
    return next((held[key] for key in keys if key in held), None)


def _claim(contact: Contact, keys: Sequence[Identity]) -> set[Identity]:
    """Give `contact` the keys no contact holds; the ones it got. Inserted in one global order
    (kind, value), so two claims never wait on each other in a cycle."""
    ordered = sorted(set(keys), key=lambda k: (k.kind, k.value))
    if not ordered:
        return set()
    rows = ", ".join(["(%s, %s, %s, %s, now())"] * len(ordered))
    params: list[Any] = []
    for key in ordered:
        params += [contact.organization_id, contact.pk, key.kind, key.value]
    with connection.cursor() as cursor:
        cursor.execute(CLAIM_SQL.format(rows=rows), params)
        return {Identity(kind, value) for kind, value in cursor.fetchall()}


def _fill_blanks(contact: Contact, given: Mapping[str, str]) -> None:
    changed = [name for name, value in given.items() if value and not getattr(contact, name)]
    if changed and contact.anonymized_at is None:
        Contact.objects.filter(pk=contact.pk).update(**{name: given[name] for name in changed})
        for name in changed:
            setattr(contact, name, given[name])


def _created_emit(contact: Contact, source: str) -> None:
    eventbus.emit(
        "contact.created",
        organization=contact.organization_id,
        entity_kind="contact",
        entity_id=contact.pk,
        payload={"contact_id": str(contact.pk), "source": source},
        idempotency_key=f"contact.created:{contact.pk}",
    )


def contact_identity_add(contact: Contact, **identifiers: str) -> bool:
    """Give `contact` more identifiers (`identities` keywords) no one else holds; whether every
    one is now the contact's (False: another contact holds one, a duplicate to merge)."""
    keys = identities(**identifiers)
    claimed = _claim(contact, keys)
    mine = set(ContactIdentity.objects.filter(contact=contact).values_list("kind", "value"))
    missing = [k for k in keys if k not in claimed and (k.kind, k.value) not in mine]
    if missing:
        logger.info(
            "contact %s: %d identifier(s) held by another contact (merge them)",
            contact.pk,
            len(missing),
        )
    return not missing


def contact_create(
    *,
    organization_id: uuid.UUID,
    name: str = "",
    phone: str = "",
    email: str = "",
    source: str = "api",
    actor: str,
) -> Contact:
    """A new contact (API, admin): refused with ContactConflict when another contact holds its
    phone or e-mail (the existing one is named: update or merge it instead)."""
    keys = identities(phone=phone, email=email)
    if not keys:
        raise ValueError("a contact needs a phone or an e-mail")
    with transaction.atomic():
        existing = _owner(organization_id, keys)
        if existing is not None:
            raise ContactConflict(f"contact {existing.pk} already has this phone or e-mail")
        contact, created = contact_resolve(
            organization_id=organization_id, phone=phone, email=email, name=name, source=source
        )
        if not created:  # a concurrent request created it between the two reads
            raise ContactConflict(f"contact {contact.pk} already has this phone or e-mail")
        _audit(contact, actor, "crm.contact.create", {"source": source})
    return contact


def contact_update(contact: Contact, *, actor: str, **fields: str) -> Contact:
    """Change a contact's name, phone or e-mail; a new phone or e-mail becomes its identifier
    (ContactConflict when another contact holds it: merge them instead)."""
    unknown = set(fields) - {"name", "phone", "email"}
    if unknown:
        raise ValueError(f"unknown contact field(s): {sorted(unknown)}")
    with transaction.atomic():
        locked = _locked_live(contact)
        keys = identities(phone=fields.get("phone", ""), email=fields.get("email", ""))
        holder = _owner(locked.organization_id, keys)
        if holder is not None and holder.pk != locked.pk:
            raise ContactConflict(f"contact {holder.pk} already has this phone or e-mail")
        for name, value in fields.items():
            setattr(locked, name, value.strip())
        locked.save(update_fields=list(fields))
        _claim(locked, keys)
        _audit(locked, actor, "crm.contact.update", {"fields": sorted(fields)})
    return locked


def _locked_live(contact: Contact) -> Contact:
    locked = Contact.objects.select_for_update().get(pk=contact.pk)
    if locked.anonymized_at is not None:
        raise ContactConflict("this contact was anonymized (LGPD): it cannot change")
    if locked.merged_into_id is not None:
        raise ContactConflict(f"this contact was merged into {locked.merged_into_id}")
    return locked


def contact_merge(*, source: Contact, into: Contact, actor: str) -> Contact:
    """Merge `source` into `into`: its conversations, messages (with them), orders, leads,
    consents and identities move to `into`, which gets the fields it lacks (name, phone,
    e-mail, CPF); `source` keeps no personal data and points at `into` (`merged_into`).
    `contact.merged` (ids and the filled field names only) and the audit row are written in the
    same transaction. ContactConflict for a contact merged into itself, another organization's,
    an anonymized or an already-merged one."""
    if source.pk == into.pk:
        raise ContactConflict("a contact cannot be merged into itself")
    if source.organization_id != into.organization_id:
        raise ContactConflict("both contacts must belong to the same organization")
    with transaction.atomic():
        first, second = sorted([source, into], key=lambda c: str(c.pk))  # one lock order
        _locked_live(first), _locked_live(second)
        source = Contact.objects.get(pk=source.pk)
        into = Contact.objects.get(pk=into.pk)
        merged_fields = [
            name for name in MERGED_FIELDS if getattr(source, name) and not getattr(into, name)
        ]
        for name in merged_fields:
            setattr(into, name, getattr(source, name))
        if into.blocked_at is None and source.blocked_at is not None:
            into.blocked_at, into.blocked_reason = source.blocked_at, source.blocked_reason
        into.save()
        moved = {
            "conversations": Conversation.objects.filter(contact=source).update(contact=into),
            "orders": Order.objects.filter(contact=source).update(contact=into),
            "leads": Lead.objects.filter(contact=source).update(contact=into),
            "consents": ConsentRecord.objects.filter(contact=source).update(contact=into),
            "identities": ContactIdentity.objects.filter(contact=source).update(contact=into),
        }
        source.name = source.phone = source.email = source.cpf_digest = ""
        source.cpf_encrypted = ""
        source.merged_into, source.merged_at = into, timezone.now()
        source.save()
        _claim(into, contact_identities(into))
        eventbus.emit(
            "contact.merged",
            organization=into.organization_id,
            entity_kind="contact",
            entity_id=into.pk,
            payload={
                "from_contact_id": str(source.pk),
                "into_contact_id": str(into.pk),
                "merged_fields": merged_fields,
            },
            idempotency_key=f"contact.merged:{source.pk}",
        )
        _audit(
            into,
            actor,
            "crm.contact.merge",
            {"from_contact_id": str(source.pk), "merged_fields": merged_fields, **moved},
        )
    return into


def contact_block(contact: Contact, *, actor: str, reason: str = "operator") -> Contact:
    """Block a contact (no more messages: the send worker refuses) with `contact.blocked`,
    audited. Blocking a blocked contact changes nothing."""
    with transaction.atomic():
        locked = _locked_live(contact)
        if locked.blocked_at is not None:
            return locked
        locked.blocked_at, locked.blocked_reason = timezone.now(), reason[:64]
        locked.save(update_fields=["blocked_at", "blocked_reason"])
        eventbus.emit(
            "contact.blocked",
            organization=locked.organization_id,
            entity_kind="contact",
            entity_id=locked.pk,
            payload={"contact_id": str(locked.pk), "reason": locked.blocked_reason},
            idempotency_key=f"contact.blocked:{locked.pk}:{locked.blocked_at.isoformat()}",
        )
        _audit(locked, actor, "crm.contact.block", {"reason": locked.blocked_reason})
    return locked


def contact_unblock(contact: Contact, *, actor: str) -> Contact:
    """Let a blocked contact receive messages again (an opt back in), audited. The catalog has
    no unblock event: the audit row is the record. Unblocking an unblocked contact changes
    nothing."""
    with transaction.atomic():
        locked = _locked_live(contact)
        if locked.blocked_at is None:
            return locked
        previous = locked.blocked_reason
        locked.blocked_at, locked.blocked_reason = None, ""
        locked.save(update_fields=["blocked_at", "blocked_reason"])
        _audit(locked, actor, "crm.contact.unblock", {"was": previous})
    return locked


def _audit(contact: Contact, actor: str, action: str, details: Mapping[str, Any]) -> None:
    audit.record(
        actor=actor,
        action=action,
        target_type="crm.contact",
        target_id=contact.pk,
        organization_id=contact.organization_id,
        details=details,
    )


def conversation_for(
    contact: Contact, *, channel: str, external_chat_id: str
) -> tuple[Conversation, bool]:
    """The contact's conversation on `channel` (its newest), or a new one with
    `conversation.opened`; (conversation, opened). The contact's row is locked first, so
    concurrent first messages open one conversation."""
    Contact.objects.select_for_update().filter(pk=contact.pk).first()
    found = (
        Conversation.objects.filter(contact=contact, channel=channel)
        .order_by("-created_at")
        .first()
    )
    if found is not None:
        return found, False
    conversation = Conversation.objects.create(
        organization_id=contact.organization_id,
        contact=contact,
        channel=channel,
        external_chat_id=external_chat_id,
    )
    eventbus.emit(
        "conversation.opened",
        organization=contact.organization_id,
        entity_kind="conversation",
        entity_id=conversation.pk,
        payload={
            "conversation_id": str(conversation.pk),
            "contact_id": str(contact.pk),
            "channel": channel,
        },
        idempotency_key=f"conversation.opened:{conversation.pk}",
    )
    return conversation, True


def order_confirm(
    *,
    organization: Organization,
    number: str,
    total_cents: int,
    currency: str = "BRL",
    items: Sequence[Mapping[str, Any]] = (),
    status: Mapping[str, str] | None = None,
    also_emit: Sequence[Mapping[str, Any]] = (),
    fields: Mapping[str, Any] | None = None,
    confirmed_at: dt.datetime | None = None,
    announce: bool = True,
) -> Order:
    """Confirm order `number` and emit `order.confirmed` in the same transaction (seed 004).

    Either the order and its events commit together or neither does. Confirming an order that is
    already confirmed returns it unchanged (no second event). `order.confirmed` is a fat event:
    totals, external codes and items, so a consumer need not read the order back.
    `items`: `[{"sku", "name", "qty", "unit_cents"}]`. `status`: `status_tag`, `status_name`,
    `phase` to write on the order (an order.pre pipeline's set-status). `fields`: other Order
    fields (customer, shipping, Nuvemshop ids). `also_emit`: more events (`emit` keyword
    arguments: event_type, entity_kind, payload, idempotency_key...), written in the same
    transaction with `causation_id` = the `order.confirmed` event's id (and, for an
    `entity_kind` of "order" without an `entity_id`, this order's id).

    Every order is confirmed here: `POST /api/v1/orders` (pipelines.services.order_create) and
    the shop's orders once paid (nuvemshop.upserts.order_upsert). `confirmed_at`: when (the
    shop's payment time; default now). `announce=False` confirms without `order.confirmed` (so
    no order.post): a shop's history, paid before the store was connected.
    """
    if not number or not number.strip():
        raise ValueError("an order number is required")
    if total_cents < 0:
        raise ValueError(f"total_cents must not be negative, got {total_cents}")
    with transaction.atomic():
        order, _ = Order.objects.select_for_update().get_or_create(
            organization=organization,
            number=number.strip(),
            defaults={
                "total_cents": total_cents,
                "currency": currency,
                "items": [dict(item) for item in items],
                **dict(status or {}),
                **dict(fields or {}),
            },
        )
        if order.status == Order.Status.CONFIRMED:
            return order
        order.status = Order.Status.CONFIRMED
        order.confirmed_at = confirmed_at or timezone.now()
        order.placed_at = order.placed_at or order.confirmed_at
        order.save(update_fields=["status", "confirmed_at", "placed_at"])
        if not announce:
            return order
        confirmed = eventbus.emit(
            "order.confirmed",
            organization=organization,
            entity_kind="order",
            entity_id=order.id,
            payload=order_summary(order),
            idempotency_key=f"order.confirmed:{order.id}",
        )
        for extra in also_emit:
            about_order = {"entity_id": order.id} if extra.get("entity_kind") == "order" else {}
            eventbus.emit(
                **{"organization": organization, **about_order, **extra},
                causation_id=confirmed.id,
            )
    return order


def order_summary(order: Order) -> dict[str, Any]:
    """`order.confirmed`'s payload: ids, totals, external codes and items (no customer data)."""
    return {
        "order_id": str(order.id),
        "number": order.number,
        "total_cents": order.total_cents,
        "total_amount": f"{order.total_cents // 100}.{order.total_cents % 100:02d}",
        "currency": order.currency,
        "items": list(order.items),
        "ns_store_id": order.ns_store_id,
        "ns_order_id": order.ns_order_id,
        "status_tag": order.status_tag,
        "confirmed_at": order.confirmed_at.isoformat() if order.confirmed_at else None,
    }


def send_message(
    *,
    conversation: Conversation,
    body: str = "",
    media_urls: Sequence[str] = (),
    sender: str = Message.Sender.AGENT,
    reply_to: Message | None = None,
    is_template: bool = False,
) -> Message:
    """Queue an outbound message on `conversation` and emit `message.queued`, in one transaction.

    The event carries ids only (never the text or the phone number): the send worker reads the
    message row. With `sender="ai"` and `reply_to`, a second reply to the same inbound message is
    refused by the database (`message_one_ai_reply_uniq`) and the first one is returned.
    Raises ValueError for an empty message or a sender that is not a Message.Sender.
    """
    if not body.strip() and not media_urls:
        raise ValueError("a message needs a body or at least one media URL")
    if sender not in Message.Sender.values or sender == Message.Sender.CONTACT:
        raise ValueError(f"an outbound message's sender must be agent, ai or system: {sender!r}")
    if reply_to is not None and reply_to.conversation_id != conversation.pk:
        raise ValueError("reply_to must be a message of the same conversation")
    with transaction.atomic():
        if sender == Message.Sender.AI and reply_to is not None:
            existing = Message.objects.filter(reply_to=reply_to, sender=sender).first()
            if existing is not None:
                return existing
        message = Message.objects.create(
            organization_id=conversation.organization_id,
            conversation=conversation,
            direction=Message.Direction.OUTBOUND,
            status=Message.Status.QUEUED,
            sender=sender,
            body=body,
            media_urls=list(media_urls),
            reply_to=reply_to,
            is_template=is_template,
        )
        emit_message_queued(message)
    return message


def emit_message_queued(message: Message, *, idempotency_key: str = "") -> None:
    """`message.queued` for an outbound message, which its channel's send worker consumes: ids
    only (the worker reads the row). The key defaults to one per message; a re-queue (the
    WhatsApp recovery job) passes its own."""
    conversation = message.conversation
    eventbus.emit(
        "message.queued",
        organization=message.organization_id,
        entity_kind="message",
        entity_id=message.pk,
        payload={
            "message_id": str(message.pk),
            "conversation_id": str(conversation.pk),
            "contact_id": str(conversation.contact_id),
            "channel": conversation.channel,
            "sender": message.sender,
        },
        idempotency_key=idempotency_key or f"message.queued:{message.pk}",
    )


def register_send_check(channel: str, check: SendCheck) -> None:
    """Let a channel say, before a message is queued, why it would refuse to send it (its send
    worker still checks again when it sends). The channel app registers at ready()."""
    _send_checks[channel] = check


def send_refusal(conversation: Conversation, *, is_template: bool = False) -> str | None:
    """Why the conversation's channel would refuse a message now (e.g. "contact_blocked",
    "window_closed"), or None. A blocked contact is refused on every channel."""
    if conversation.contact.blocked_at is not None:
        return "contact_blocked"
    check = _send_checks.get(conversation.channel)
    return check(conversation, is_template) if check is not None else None


# -- leads ----------------------------------------------------------------------------------------


def lead_create(
    *,
    organization: Organization | uuid.UUID,
    name: str,
    source: str = "manual",
    pipeline_id: str = "default",
    stage_id: str = "new",
    contact: Contact | None = None,
    owner_id: int | None = None,
    value_cents: int | None = None,
) -> Lead:
    """Create an open lead and emit `lead.created` in the same transaction (seed 000 §3's
    `createLead`). The contact and owner must belong to the organization (`LeadError`)."""
    org_id = organization.pk if isinstance(organization, Organization) else organization
    fields = _lead_fields(org_id, name=name, contact=contact, value_cents=value_cents)
    check_owner(org_id, owner_id)
    with transaction.atomic():
        lead = Lead.objects.create(
            organization_id=org_id,
            source=source,
            pipeline_id=pipeline_id,
            stage_id=stage_id,
            owner_id=owner_id,
            **fields,
        )
        eventbus.emit(
            "lead.created",
            organization=org_id,
            entity_kind="lead",
            entity_id=lead.id,
            payload={
                "name": lead.name,
                "source": lead.source,
                "owner_id": lead.owner_id,
                "pipeline_id": lead.pipeline_id,
                "stage_id": lead.stage_id,
                "contact_id": str(lead.contact_id) if lead.contact_id else None,
                "value_cents": lead.value_cents,
            },
            idempotency_key=f"lead.created:{lead.id}",
        )
    return lead


def lead_update(lead: Lead, **changes: Any) -> Lead:
    """Change the lead's `LEAD_FIELDS`; the trigger `lead_updated_emit` emits `lead.updated`
    with each changed field's from/to. An unchanged value changes nothing (no event)."""
    unknown = set(changes) - set(LEAD_FIELDS)
    if unknown:
        raise LeadError(f"cannot change {', '.join(sorted(unknown))} here", field=min(unknown))
    fields = _lead_fields(lead.organization_id, **changes)
    return _lead_write(lead, fields)


def lead_change_stage(lead: Lead, *, stage_id: str, pipeline_id: str | None = None) -> Lead:
    """Move the lead to `stage_id`; the trigger `lead_stage_changed_emit` emits
    `lead.stage_changed` (from, to) in this transaction."""
    if not stage_id or not stage_id.strip():
        raise LeadError("a stage is required", field="stage_id")
    fields: dict[str, Any] = {"stage_id": stage_id.strip()}
    if pipeline_id:
        fields["pipeline_id"] = pipeline_id.strip()
    return _lead_write(lead, fields)


def lead_assign(lead: Lead, *, owner_id: int | None) -> Lead:
    """Give the lead to `owner_id` (None: unassign); the trigger `lead_assigned_emit` emits
    `lead.assigned` (from, to). The owner must be a user of the lead's organization."""
    check_owner(lead.organization_id, owner_id)
    return _lead_write(lead, {"owner_id": owner_id})


def lead_mark_won(lead: Lead, *, value_cents: int | None = None, reason: str = "") -> Lead:
    """Close an open lead as won through the SQL function `mark_lead_won` (which emits
    `lead.won`); `LeadClosed` when it is already won, lost or deleted."""
    if value_cents is not None and value_cents < 0:
        raise LeadError("value_cents must not be negative", field="value_cents")
    _close(lead, "mark_lead_won", [value_cents, reason])
    return lead


def lead_mark_lost(lead: Lead, *, reason: str) -> Lead:
    """Close an open lead as lost through `mark_lead_lost` (which emits `lead.lost`)."""
    if not reason or not reason.strip():
        raise LeadError("a reason is required to mark a lead lost", field="reason")
    _close(lead, "mark_lead_lost", [reason.strip()])
    return lead


def lead_delete(lead: Lead, *, actor: str) -> Lead:
    """Soft-delete the lead (deleted_at, deleted_by); the trigger `lead_deleted_emit` emits
    `lead.deleted`. Deleting a deleted lead changes nothing."""
    with transaction.atomic():
        locked = Lead.objects.select_for_update().get(pk=lead.pk)
        if locked.deleted_at is None:
            locked.deleted_at = timezone.now()
            locked.deleted_by = actor[:100]
            locked.save(update_fields=["deleted_at", "deleted_by", "updated_at"])
    lead.refresh_from_db()
    return lead


def lead_activity_record(lead: Lead, *, kind: str = "note", note: str = "") -> LeadActivity:
    """Record an activity on a live lead and emit `lead_activity.recorded` (seed 000 §3.2) in the
    same transaction; the event carries an excerpt of the note, not all of it."""
    kind = (kind or "").strip()
    if not kind or len(kind) > KIND_CHARS:
        raise LeadError(f"kind must be 1 to {KIND_CHARS} characters", field="kind")
    with transaction.atomic():
        locked = Lead.objects.select_for_update().get(pk=lead.pk)
        if locked.deleted_at is not None:
            raise LeadClosed("the lead is deleted")
        activity = LeadActivity.objects.create(
            organization_id=lead.organization_id, lead=locked, kind=kind, note=note
        )
        excerpt = note if len(note) <= EXCERPT_CHARS else note[: EXCERPT_CHARS - 1] + "…"
        eventbus.emit(
            "lead_activity.recorded",
            organization=lead.organization_id,
            entity_kind="lead",
            entity_id=lead.pk,
            payload={
                "activity_id": activity.pk,
                "activity_type": kind,
                "lead_id": str(lead.pk),
                "content_excerpt": excerpt,
            },
            idempotency_key=f"lead_activity.recorded:{activity.pk}",
        )
    return activity


def _lead_fields(org_id: uuid.UUID, **fields: Any) -> dict[str, Any]:
    """Checked lead fields (name, contact of the organization, value)."""
    if "name" in fields:
        name = (fields["name"] or "").strip()
        if not name:
            raise LeadError("a lead needs a name", field="name")
        fields["name"] = name
    contact = fields.get("contact")
    if contact is not None and contact.organization_id != org_id:
        raise LeadError("no such contact in this organization", field="contact_id")
    value = fields.get("value_cents")
    if value is not None and value < 0:
        raise LeadError("value_cents must not be negative", field="value_cents")
    return fields


def check_owner(org_id: uuid.UUID, owner_id: int | None) -> None:
    """`LeadError` on `owner_id` unless it is an active user bound to the organization."""
    if owner_id is None:
        return
    active = get_user_model().objects.filter(pk=owner_id, is_active=True)
    bound = StaffOrganization.objects.filter(user_id=owner_id, organization_id=org_id)
    if not (active.exists() and bound.exists()):
        raise LeadError("no such user in this organization", field="owner_id")


def _lead_write(lead: Lead, fields: Mapping[str, Any]) -> Lead:
    """Write `fields` on a live lead, locked; the row's triggers emit in this transaction."""
    with transaction.atomic():
        locked = Lead.objects.select_for_update().get(pk=lead.pk)
        if locked.deleted_at is not None:
            raise LeadClosed("the lead is deleted")
        changed = [name for name, value in fields.items() if getattr(locked, name) != value]
        for name in changed:
            setattr(locked, name, fields[name])
        if changed:
            locked.save(update_fields=[*changed, "updated_at"])
    lead.refresh_from_db()
    return lead


def _close(lead: Lead, function: str, args: list[Any]) -> None:
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {function}(%s, %s, {', '.join(['%s'] * len(args))})",
                [lead.organization_id, lead.pk, *args],
            )
    except DatabaseError as exc:
        cause = exc.__cause__
        if isinstance(
            cause, psycopg.errors.ObjectNotInPrerequisiteState | psycopg.errors.NoDataFound
        ):
            raise LeadClosed(str(cause.diag.message_primary or cause)) from None
        raise
    lead.refresh_from_db()
