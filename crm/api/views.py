"""`/api/v1/leads...` and `POST /api/v1/contacts/<id>/messages`, scoped to the API key's
organization.

Reads need `leads:read` (or `leads:write`, which implies it); lead writes `leads:write`; sending
a message `messages:send`. Another tenant's ids, and deleted leads, are 404s. Each write goes
through one `crm.services` function, so its event (`lead.*`, `lead_activity.recorded`,
`message.queued`) is written in the same transaction as the change.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers, status
from rest_framework.response import Response

from core import context
from core.api import idempotency
from core.api.conf import api_settings
from core.api.errors import InvalidState, error_body
from core.api.pagination import Position, page
from core.api.permissions import WriteImpliesRead
from core.api.schema import errors, ok, request_example, write_implies_read
from core.api.views import ApiView, found_or_404
from core.replica.routing import replica_view
from crm import selectors, services
from crm.api import examples
from crm.api.scopes import LEADS_READ, LEADS_WRITE, MESSAGES_SEND
from crm.api.serializers import (
    ActivityFilter,
    ActivityInput,
    ActivityPageSerializer,
    ActivitySerializer,
    AssignInput,
    LeadFilter,
    LeadInput,
    LeadPageSerializer,
    LeadSerializer,
    LeadUpdate,
    LostInput,
    MessageInput,
    QueuedMessageSerializer,
    StageInput,
    WonInput,
)
from crm.models import Contact, Lead

NOT_FOUND = "No such lead in this organization."
CONTACT_NOT_FOUND = "No such contact in this organization."
CLOSED = "lead 6f1c2a54-0b7e-4c1e-9d3a-2f4b8c9d0e11 is already won"
IDEMPOTENCY_PARAMETER = OpenApiParameter(
    idempotency.HEADER,
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="Retry safely: the same key and body within 24 h replays the first response "
    "(with `Idempotent-Replayed: true`); the same key with another body is a 409.",
)
REFUSALS = {
    "contact_blocked": "the contact is blocked (they asked to stop, or an operator blocked them)",
    "no_consent": "the contact withdrew their consent to messages on this channel",
    "window_closed": "the contact's 24-hour window is closed (no message from them in the "
    "last 24 hours): send an approved template instead",
    "no_conversation": "the contact has no conversation on this channel yet (they have never "
    "written): send an approved template through the channel first",
}


operation = write_implies_read(LEADS_READ, LEADS_WRITE, tag="leads")


@contextmanager
def refusals() -> Iterator[None]:
    """Service refusals as API errors: bad input 400 on its field, a closed lead 409."""
    try:
        yield
    except services.LeadClosed as exc:
        raise InvalidState(str(exc)) from None
    except services.LeadError as exc:
        raise serializers.ValidationError({exc.field or "non_field_errors": [str(exc)]}) from None


class LeadView(ApiView):
    permission_classes = [WriteImpliesRead]
    write_scope = LEADS_WRITE
    required_scopes = {
        "GET": LEADS_READ,
        "POST": LEADS_WRITE,
        "PATCH": LEADS_WRITE,
        "DELETE": LEADS_WRITE,
    }

    def lead(self, request: Any, lead_id: uuid.UUID) -> Lead:
        found = selectors.lead_get(
            organization_id=self.client(request).organization_id, lead_id=lead_id
        )
        return found_or_404(found, NOT_FOUND)

    def contact(self, request: Any, contact_id: uuid.UUID | None) -> Contact | None:
        """The body's contact, of the key's organization; a 400 on `contact_id` otherwise."""
        if contact_id is None:
            return None
        found = selectors.contact_get(
            organization_id=self.client(request).organization_id, contact_id=contact_id
        )
        if found is None:
            raise serializers.ValidationError({"contact_id": [CONTACT_NOT_FOUND]})
        return found

    def answer(self, lead: Lead, code: int = status.HTTP_200_OK) -> Response:
        return Response(render_lead(lead), status=code)

    def act(
        self,
        request: Any,
        lead_id: uuid.UUID,
        serializer: type[serializers.Serializer],
        write: Callable[[Lead, dict[str, Any]], Lead],
    ) -> Response:
        """Validate the body, run `write` on the organization's lead, answer with the lead."""
        lead = self.lead(request, lead_id)
        data = self.validated(serializer, request.data)
        with refusals():
            return self.answer(write(lead, data))


def render_lead(lead: Lead) -> dict[str, Any]:
    return dict(LeadSerializer(lead).data)


class LeadsView(LeadView):
    @operation(
        name="list",
        summary="List leads",
        description="The organization's leads (not deleted), newest first, optionally "
        "filtered by status, stage, pipeline, owner or contact; cursor-paginated (follow "
        "`next`).",
        scope=LEADS_READ,
        parameters=[LeadFilter],
        responses={200: ok(LeadPageSerializer, examples.PAGE), **errors(400, 403)},
    )
    @replica_view
    def get(self, request: Any) -> Response:
        query = self.validated(LeadFilter, request.query_params.dict())
        limit = query.pop("limit", None) or api_settings.PAGE_SIZE
        cursor: Position | None = query.pop("cursor", None)
        rows = selectors.leads_page(
            organization_id=self.client(request).organization_id,
            before=(cursor.created_at, cursor.id) if cursor else None,
            limit=limit + 1,
            filters=query,
        )
        return Response(page(request, rows, limit=limit, position_of=_position, render=_leads))

    @operation(
        name="create",
        summary="Create a lead",
        description="Creates an open lead and emits `lead.created` with it. The contact and "
        "the owner must belong to the key's organization. Send an `Idempotency-Key` to retry "
        "safely.",
        scope=LEADS_WRITE,
        request=LeadInput,
        examples=[request_example("A lead from a web form", examples.CREATE_REQUEST)],
        parameters=[IDEMPOTENCY_PARAMETER],
        responses={201: ok(LeadSerializer, examples.LEAD), **errors(400, 403, 409, 413, 415)},
    )
    def post(self, request: Any) -> Response:
        data = self.validated(LeadInput, request.data)
        client = self.client(request)
        contact = self.contact(request, data.pop("contact_id", None))
        data.setdefault("source", "api")

        def work() -> tuple[int, dict[str, Any]]:
            with refusals(), context.bind(actor_id=client.actor, source="api"):
                lead = services.lead_create(
                    organization=client.organization_id, contact=contact, **data
                )
            return status.HTTP_201_CREATED, render_lead(lead)

        return idempotency.respond_once(request, scope="leads.create", work=work)


class LeadDetailView(LeadView):
    @operation(
        name="retrieve",
        summary="Get a lead",
        description="One lead: its stage, status, owner, value and contact.",
        scope=LEADS_READ,
        responses={200: ok(LeadSerializer, examples.LEAD), **errors(403, 404, e404=NOT_FOUND)},
    )
    def get(self, request: Any, lead_id: uuid.UUID) -> Response:
        return self.answer(self.lead(request, lead_id))

    @operation(
        name="update",
        summary="Update a lead",
        description="Changes the name, source, pipeline, contact or value; fields left out "
        "stay. Emits `lead.updated` with each changed field's old and new value (nothing when "
        "nothing changed). The stage, owner and outcome have their own operations.",
        scope=LEADS_WRITE,
        request=LeadUpdate,
        examples=[request_example("A bigger deal", examples.UPDATE_REQUEST)],
        responses={
            200: ok(LeadSerializer, examples.UPDATED),
            **errors(400, 403, 404, 413, 415, e404=NOT_FOUND),
        },
    )
    def patch(self, request: Any, lead_id: uuid.UUID) -> Response:
        lead = self.lead(request, lead_id)
        data = self.validated(LeadUpdate, request.data, partial=True)
        if "contact_id" in data:
            data["contact"] = self.contact(request, data.pop("contact_id"))
        with refusals():
            return self.answer(services.lead_update(lead, **data))

    @operation(
        name="delete",
        summary="Delete a lead",
        description="Soft-deletes the lead: it disappears from the API and emits "
        "`lead.deleted` (`soft: true`, `deleted_by`: this key).",
        scope=LEADS_WRITE,
        responses={204: None, **errors(403, 404, e404=NOT_FOUND)},
    )
    def delete(self, request: Any, lead_id: uuid.UUID) -> Response:
        lead = self.lead(request, lead_id)
        services.lead_delete(lead, actor=self.client(request).actor)
        return Response(status=status.HTTP_204_NO_CONTENT)


class LeadStageView(LeadView):
    @operation(
        name="stage",
        summary="Move a lead to a stage",
        description="Sets the lead's stage (and optionally its pipeline); emits "
        "`lead.stage_changed` with the old and new stage. Moving to the current stage "
        "changes nothing.",
        scope=LEADS_WRITE,
        request=StageInput,
        examples=[request_example("To the proposal stage", examples.STAGE_REQUEST)],
        responses={
            200: ok(LeadSerializer, examples.MOVED),
            **errors(400, 403, 404, 413, 415, e404=NOT_FOUND),
        },
    )
    def post(self, request: Any, lead_id: uuid.UUID) -> Response:
        return self.act(
            request,
            lead_id,
            StageInput,
            lambda lead, data: services.lead_change_stage(lead, **data),
        )


class LeadAssignView(LeadView):
    @operation(
        name="assign",
        summary="Assign a lead",
        description="Gives the lead to a user of the organization (null: nobody); emits "
        "`lead.assigned` with the previous and new owner.",
        scope=LEADS_WRITE,
        request=AssignInput,
        examples=[request_example("To a seller", examples.ASSIGN_REQUEST)],
        responses={
            200: ok(LeadSerializer, examples.ASSIGNED),
            **errors(400, 403, 404, 413, 415, e404=NOT_FOUND),
        },
    )
    def post(self, request: Any, lead_id: uuid.UUID) -> Response:
        return self.act(
            request,
            lead_id,
            AssignInput,
            lambda lead, data: services.lead_assign(lead, owner_id=data["owner_id"]),
        )


class LeadWonView(LeadView):
    @operation(
        name="won",
        summary="Mark a lead won",
        description="Closes an open lead as won (with its value, by default the lead's) and "
        "emits `lead.won`. A lead already won or lost is a 409.",
        scope=LEADS_WRITE,
        request=WonInput,
        examples=[request_example("Signed", examples.WON_REQUEST)],
        responses={
            200: ok(LeadSerializer, examples.WON),
            **errors(400, 403, 404, 409, 413, 415, e404=NOT_FOUND, e409=CLOSED),
        },
    )
    def post(self, request: Any, lead_id: uuid.UUID) -> Response:
        return self.act(
            request, lead_id, WonInput, lambda lead, data: services.lead_mark_won(lead, **data)
        )


class LeadLostView(LeadView):
    @operation(
        name="lost",
        summary="Mark a lead lost",
        description="Closes an open lead as lost, with the reason, and emits `lead.lost`. A "
        "lead already won or lost is a 409.",
        scope=LEADS_WRITE,
        request=LostInput,
        examples=[request_example("Too expensive", examples.LOST_REQUEST)],
        responses={
            200: ok(LeadSerializer, examples.LOST),
            **errors(400, 403, 404, 409, 413, 415, e404=NOT_FOUND, e409=CLOSED),
        },
    )
    def post(self, request: Any, lead_id: uuid.UUID) -> Response:
        return self.act(
            request,
            lead_id,
            LostInput,
            lambda lead, data: services.lead_mark_lost(lead, reason=data["reason"]),
        )


class LeadActivitiesView(LeadView):
    @operation(
        name="activities_list",
        summary="List a lead's activities",
        description="Notes, calls and other activities recorded on the lead, newest first "
        "(page with `before_id`).",
        scope=LEADS_READ,
        parameters=[ActivityFilter],
        responses={
            200: ok(ActivityPageSerializer, examples.ACTIVITIES),
            **errors(400, 403, 404, e404=NOT_FOUND),
        },
    )
    def get(self, request: Any, lead_id: uuid.UUID) -> Response:
        query = self.validated(ActivityFilter, request.query_params.dict())
        lead = self.lead(request, lead_id)
        limit = query.get("limit") or api_settings.PAGE_SIZE
        rows = selectors.lead_activities(
            lead=lead, before_id=query.get("before_id"), limit=limit + 1
        )
        shown = rows[:limit]
        return Response(
            {
                "results": ActivitySerializer(shown, many=True).data,
                "next_before_id": shown[-1].pk if len(rows) > limit else None,
            }
        )

    @operation(
        name="activities_create",
        summary="Record an activity on a lead",
        description="Records a note, call or other activity and emits "
        "`lead_activity.recorded` (with an excerpt of the note).",
        scope=LEADS_WRITE,
        request=ActivityInput,
        examples=[request_example("A call", examples.ACTIVITY_REQUEST)],
        responses={
            201: ok(ActivitySerializer, examples.ACTIVITY),
            **errors(400, 403, 404, 413, 415, e404=NOT_FOUND),
        },
    )
    def post(self, request: Any, lead_id: uuid.UUID) -> Response:
        lead = self.lead(request, lead_id)
        data = self.validated(ActivityInput, request.data)
        with refusals():
            activity = services.lead_activity_record(
                lead,
                kind=data.get("kind", "note"),
                note=data.get("note", ""),
            )
        return Response(ActivitySerializer(activity).data, status=status.HTTP_201_CREATED)


class ContactMessagesView(ApiView):
    required_scopes = {"POST": MESSAGES_SEND}

    @operation(
        name="send",
        tag="messages",
        summary="Send a message to a contact",
        description="Queues a message on the contact's conversation of the channel (WhatsApp "
        "by default); the channel's worker sends it and reports `message.sent`, "
        "`message.delivered` or `message.failed`. Refused at once with 409 `send_refused` "
        "(the reason in `fields.reason`) when the contact is blocked, withdrew consent, has "
        "never written on the channel, or their 24-hour window is closed (an approved "
        "template, `is_template: true`, may still be sent then). Send an `Idempotency-Key` "
        "to retry safely.",
        scope=MESSAGES_SEND,
        request=MessageInput,
        examples=[request_example("A reply", examples.MESSAGE_REQUEST)],
        parameters=[IDEMPOTENCY_PARAMETER],
        responses={
            202: ok(QueuedMessageSerializer, examples.QUEUED),
            **errors(
                400,
                403,
                404,
                409,
                413,
                415,
                e404=CONTACT_NOT_FOUND,
                e409=("send_refused", f"This message cannot be sent: {REFUSALS['window_closed']}."),
            ),
        },
    )
    def post(self, request: Any, contact_id: uuid.UUID) -> Response:
        client = self.client(request)
        contact = found_or_404(
            selectors.contact_get(organization_id=client.organization_id, contact_id=contact_id),
            CONTACT_NOT_FOUND,
        )
        data = self.validated(MessageInput, request.data)
        conversation = selectors.contact_conversation(
            contact=contact, channel=data.get("channel", "whatsapp")
        )
        is_template = data.get("is_template", False)
        if conversation is None:
            return _refused("no_conversation")
        reason = services.send_refusal(conversation, is_template=is_template)
        if reason is not None:
            return _refused(reason)

        def work() -> tuple[int, dict[str, Any]]:
            with context.bind(actor_id=client.actor, source="api"):
                queued = services.send_message(
                    conversation=conversation,
                    body=data.get("body", ""),
                    media_urls=data.get("media_urls", ()),
                    is_template=is_template,
                )
            rendered = {
                "id": queued.pk,
                "conversation_id": conversation.pk,
                "contact_id": contact.pk,
                "status": queued.status,
                "is_template": queued.is_template,
                "created_at": queued.created_at,
            }
            return status.HTTP_202_ACCEPTED, dict(QueuedMessageSerializer(rendered).data)

        return idempotency.respond_once(request, scope="messages.send", work=work)


def _refused(reason: str) -> Response:
    """409 `send_refused`, the reason in `fields.reason` (nothing was queued)."""
    message = f"This message cannot be sent: {REFUSALS.get(reason, reason)}."
    body = error_body("send_refused", message, {"reason": [reason]})
    return Response(body, status=status.HTTP_409_CONFLICT)


def _position(row: Lead) -> Position:
    return Position(row.created_at, row.id)


def _leads(rows: Any) -> list[Any]:
    return list(LeadSerializer(rows, many=True).data)
