"""`/api/v1/contacts...`: the organization's contacts, scoped to the API key's organization.

Reads need `contacts:read` (or `contacts:write`, which implies it); writes `contacts:write`.
Another organization's contact ids are 404s. Every write goes through crm.services (the same
services as the channels and the admin): identities are unique per organization, so a phone
or e-mail another contact holds is a 409 naming it (merge them instead).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from rest_framework import serializers, status
from rest_framework.response import Response

from core import context
from core.api.conf import api_settings
from core.api.errors import InvalidState
from core.api.pagination import CursorField, Position, page
from core.api.permissions import WriteImpliesRead
from core.api.schema import errors, ok, request_example, write_implies_read
from core.api.views import ApiView, found_or_404
from crm import selectors, services
from crm.api.contact_scopes import CONTACTS_READ, CONTACTS_WRITE
from crm.identity import normalize_phone
from crm.models import Contact, ContactIdentity
from eventbus.api.serializers import StrictCharField, StrictSerializer

ViewMethod = TypeVar("ViewMethod", bound=Callable[..., Response])
NOT_FOUND = "No such contact in this organization."
EXAMPLE_ID = "0b5e7c52-3f0e-4a57-9c1d-1f7a2b6c9d10"
OTHER_ID = "5d1c0f3e-8a7b-4c2d-9e6f-0a1b2c3d4e5f"
CONTACT_EXAMPLE = {
    "id": EXAMPLE_ID,
    "name": "Maria Souza",
    "phone": "+5511987654321",
    "email": "maria@example.com",
    "identities": [
        {"kind": "email", "value": "maria@example.com"},
        {"kind": "phone", "value": "+5511987654321"},
    ],
    "blocked_at": None,
    "blocked_reason": "",
    "anonymized_at": None,
    "merged_into": None,
    "created_at": "2026-12-01T13:00:00Z",
}
PAGE_EXAMPLE = {"results": [CONTACT_EXAMPLE], "next_cursor": None, "next": None}
CONFLICT = f"contact {OTHER_ID} already has this phone or e-mail"


class IdentitySerializer(serializers.Serializer):
    kind = serializers.CharField()
    value = serializers.CharField()


class ContactSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    phone = serializers.CharField()
    email = serializers.CharField()
    identities = serializers.SerializerMethodField()
    blocked_at = serializers.DateTimeField(allow_null=True)
    blocked_reason = serializers.CharField()
    anonymized_at = serializers.DateTimeField(allow_null=True)
    merged_into = serializers.UUIDField(source="merged_into_id", allow_null=True)
    created_at = serializers.DateTimeField()

    def get_identities(self, contact: Contact) -> list[dict[str, str]]:
        """The contact's phones, e-mails and channel ids (the CPF's lookup key is not shown)."""
        rows = contact.identities.exclude(kind=ContactIdentity.Kind.CPF).order_by("kind", "value")
        return [{"kind": row.kind, "value": row.value} for row in rows]


class ContactPageSerializer(serializers.Serializer):
    results = ContactSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)
    next = serializers.URLField(allow_null=True)


class ContactFilter(StrictSerializer):
    phone = serializers.CharField(required=False, help_text="Any spelling (E.164, national).")
    email = serializers.CharField(required=False, help_text="Case-insensitive.")
    include_merged = serializers.BooleanField(required=False, default=False)
    limit = serializers.IntegerField(
        required=False, min_value=1, max_value=200, help_text="Default 50, max 200."
    )
    cursor = CursorField(required=False, help_text="`next_cursor` of the previous page.")


class ContactInput(StrictSerializer):
    name = StrictCharField(required=False, allow_blank=True, max_length=200)
    phone = StrictCharField(required=False, allow_blank=True, max_length=32)
    email = serializers.EmailField(required=False, allow_blank=True, max_length=254)

    def validate_phone(self, value: str) -> str:
        if value.strip() and not normalize_phone(value):
            raise serializers.ValidationError("Not a phone number (E.164, e.g. +5511987654321).")
        return value


class ContactCreateInput(ContactInput):
    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        if not (attrs.get("phone", "").strip() or attrs.get("email", "").strip()):
            raise serializers.ValidationError({"phone": ["A phone or an e-mail is required."]})
        return attrs


class MergeInput(StrictSerializer):
    from_contact_id = serializers.UUIDField(
        help_text="The contact merged into this one (its records move here; it is kept, "
        "empty, pointing at this one)."
    )


class BlockInput(StrictSerializer):
    reason = StrictCharField(required=False, max_length=64, default="operator")


operation = write_implies_read(CONTACTS_READ, CONTACTS_WRITE, tag="contacts")


@contextmanager
def refusals() -> Iterator[None]:
    """Service refusals as API errors: 409 for a contact's state, 400 for bad input."""
    try:
        yield
    except services.ContactConflict as exc:
        raise InvalidState(str(exc)) from None
    except ValueError as exc:
        raise serializers.ValidationError({"non_field_errors": [str(exc)]}) from None


class ContactView(ApiView):
    permission_classes = [WriteImpliesRead]
    write_scope = CONTACTS_WRITE
    required_scopes = {"GET": CONTACTS_READ, "POST": CONTACTS_WRITE, "PATCH": CONTACTS_WRITE}

    def contact(self, request: Any, contact_id: uuid.UUID) -> Contact:
        found = selectors.contact_get(self.client(request).organization_id, contact_id)
        return found_or_404(found, NOT_FOUND)

    def answer(self, contact: Contact, code: int = status.HTTP_200_OK) -> Response:
        contact.refresh_from_db()
        return Response(ContactSerializer(contact).data, status=code)


class ContactsView(ContactView):
    @operation(
        "list",
        "List contacts",
        description="The organization's contacts, newest first, cursor-paginated (follow "
        "`next`); by `phone` (any spelling: the ninth digit, +55 or not) or `email`. Contacts "
        "merged into another are left out unless `include_merged`.",
        scope=CONTACTS_READ,
        parameters=[ContactFilter],
        responses={200: ok(ContactPageSerializer, PAGE_EXAMPLE), **errors(400, 403)},
    )
    def get(self, request: Any) -> Response:
        query = self.validated(ContactFilter, request.query_params.dict())
        limit = query.get("limit") or api_settings.PAGE_SIZE
        cursor: Position | None = query.get("cursor")
        rows = selectors.contacts_page(
            organization_id=self.client(request).organization_id,
            before=(cursor.created_at, cursor.id) if cursor else None,
            limit=limit + 1,
            phone=query.get("phone", ""),
            email=query.get("email", ""),
            include_merged=query["include_merged"],
        )
        return Response(page(request, rows, limit=limit, position_of=_position, render=_render))

    @operation(
        "create",
        "Create a contact",
        description="A contact with a phone or an e-mail (or both), emitting `contact.created`. "
        "A phone or e-mail another contact of the organization holds (in any spelling) is a "
        "409 naming that contact.",
        scope=CONTACTS_WRITE,
        request=ContactCreateInput,
        examples=[request_example("A new customer", {"name": "Maria", "phone": "11987654321"})],
        responses={
            201: ok(ContactSerializer, CONTACT_EXAMPLE),
            **errors(400, 403, 409, 413, 415, e409=CONFLICT),
        },
    )
    def post(self, request: Any) -> Response:
        data = self.validated(ContactCreateInput, request.data)
        client = self.client(request)
        with context.bind(actor_id=client.actor, source="api"), refusals():
            contact = services.contact_create(
                organization_id=client.organization_id, actor=client.actor, source="api", **data
            )
        return self.answer(contact, status.HTTP_201_CREATED)


class ContactDetailView(ContactView):
    @operation(
        "retrieve",
        "Get a contact",
        description="One contact: its fields, identities (phones, e-mails, channel ids), "
        "block, redaction and merge state.",
        scope=CONTACTS_READ,
        responses={200: ok(ContactSerializer, CONTACT_EXAMPLE), **errors(403, 404, e404=NOT_FOUND)},
    )
    def get(self, request: Any, contact_id: uuid.UUID) -> Response:
        return Response(ContactSerializer(self.contact(request, contact_id)).data)

    @operation(
        "update",
        "Update a contact",
        description="Changes the name, phone or e-mail; fields left out stay. A new phone or "
        "e-mail becomes one of the contact's identities (409 when another contact holds it; an "
        "anonymized or merged contact cannot change: 409).",
        scope=CONTACTS_WRITE,
        request=ContactInput,
        examples=[request_example("A corrected name", {"name": "Maria Souza"})],
        responses={
            200: ok(ContactSerializer, CONTACT_EXAMPLE),
            **errors(400, 403, 404, 409, 413, 415, e404=NOT_FOUND, e409=CONFLICT),
        },
    )
    def patch(self, request: Any, contact_id: uuid.UUID) -> Response:
        contact = self.contact(request, contact_id)
        data = self.validated(ContactInput, request.data, partial=True)
        client = self.client(request)
        with context.bind(actor_id=client.actor, source="api"), refusals():
            services.contact_update(contact, actor=client.actor, **data)
        return self.answer(contact)


class ContactMergeView(ContactView):
    @operation(
        "merge",
        "Merge another contact into this one",
        description="Moves `from_contact_id`'s conversations (with their messages), orders, "
        "leads, consents and identities to this contact, which gets the fields it lacks; "
        "the other contact stays, without personal data, pointing here (`merged_into`). Emits "
        "`contact.merged` (ids and the filled field names only) and is audited. An LGPD "
        "export or redaction of this contact then covers what was merged in. A contact of "
        "another organization is a 404; merging a contact into itself a 400; an anonymized or "
        "already merged one a 409.",
        scope=CONTACTS_WRITE,
        request=MergeInput,
        examples=[
            request_example(
                "The shop's customer is the WhatsApp contact", {"from_contact_id": OTHER_ID}
            )
        ],
        responses={
            200: ok(ContactSerializer, CONTACT_EXAMPLE),
            **errors(
                400,
                403,
                404,
                409,
                413,
                415,
                e404=NOT_FOUND,
                e409=f"this contact was merged into {OTHER_ID}",
            ),
        },
    )
    def post(self, request: Any, contact_id: uuid.UUID) -> Response:
        into = self.contact(request, contact_id)
        data = self.validated(MergeInput, request.data)
        source = self.contact(request, data["from_contact_id"])
        if source.pk == into.pk:
            raise serializers.ValidationError(
                {"from_contact_id": ["A contact cannot be merged into itself."]}
            )
        client = self.client(request)
        with context.bind(actor_id=client.actor, source="api"), refusals():
            services.contact_merge(source=source, into=into, actor=client.actor)
        return self.answer(into)


class ContactBlockView(ContactView):
    @operation(
        "block",
        "Block a contact",
        description="The contact receives no more messages (the send worker refuses them). "
        "Emits `contact.blocked` and is audited; blocking a blocked contact changes nothing.",
        scope=CONTACTS_WRITE,
        request=BlockInput,
        examples=[request_example("Asked not to be contacted", {"reason": "customer_request"})],
        responses={
            200: ok(
                ContactSerializer,
                {
                    **CONTACT_EXAMPLE,
                    "blocked_at": "2026-12-02T09:00:00Z",
                    "blocked_reason": "customer_request",
                },
            ),
            **errors(400, 403, 404, 409, 413, 415, e404=NOT_FOUND),
        },
    )
    def post(self, request: Any, contact_id: uuid.UUID) -> Response:
        contact = self.contact(request, contact_id)
        data = self.validated(BlockInput, request.data)
        client = self.client(request)
        with context.bind(actor_id=client.actor, source="api"), refusals():
            services.contact_block(contact, actor=client.actor, reason=data["reason"])
        return self.answer(contact)


class ContactUnblockView(ContactView):
    @operation(
        "unblock",
        "Unblock a contact",
        description="The contact may receive messages again (an opt back in). Audited (the "
        "event catalog has no unblock event); unblocking an unblocked contact changes nothing.",
        scope=CONTACTS_WRITE,
        request=None,
        responses={
            200: ok(ContactSerializer, CONTACT_EXAMPLE),
            **errors(403, 404, 409, e404=NOT_FOUND),
        },
    )
    def post(self, request: Any, contact_id: uuid.UUID) -> Response:
        contact = self.contact(request, contact_id)
        client = self.client(request)
        with context.bind(actor_id=client.actor, source="api"), refusals():
            services.contact_unblock(contact, actor=client.actor)
        return self.answer(contact)


def _position(row: Contact) -> Position:
    created: dt.datetime = row.created_at
    return Position(created, row.id)


def _render(rows: Sequence[Contact]) -> list[Any]:
    return list(ContactSerializer(rows, many=True).data)
