"""`/api/v1/consumers/<name>`: a consumer's pause / circuit-breaker state; pause and resume.

Who may act on what: a registered consumer (code) is platform-wide, so only a key of the
platform's system organization may read or change it (any other key: 403). A consumer that is
data (a webhook subscription, `webhook:<uuid>`) belongs to one organization: only that
organization's keys see it (any other: 404, as if it did not exist). Every change is audited.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.response import Response

from core.api.schema import REQUEST_ID_PARAMETER, errors, ok, request_example
from core.api.views import ApiView
from core.models import SYSTEM_ORGANIZATION_ID
from eventbus.api import examples, scopes
from eventbus.api.serializers import StrictCharField, StrictSerializer
from eventbus.history import replays
from eventbus.operations import services
from eventbus.store import pauses
from eventbus.store.registry import registry

PLATFORM_ONLY = (
    "crm-sync-worker is a platform-wide consumer: only a key of the platform's system "
    "organization may read or change its state."
)


class ConsumerStateSerializer(serializers.Serializer):
    consumer = serializers.CharField()
    state = serializers.ChoiceField(choices=["running", "paused", "open", "half_open"])
    since = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField(allow_blank=True)
    changed_by = serializers.CharField(allow_blank=True)
    probe_at = serializers.DateTimeField(allow_null=True)
    changed = serializers.BooleanField(required=False)


class PauseSerializer(StrictSerializer):
    reason = StrictCharField(max_length=2000, help_text="Why (kept in the audit trail).")


class ResumeSerializer(StrictSerializer):
    reason = StrictCharField(max_length=2000, required=False, allow_blank=True, default="")


class ConsumerView(ApiView):
    """Base: the consumer named in the path, if this key may see it."""

    def owner(self, request: Any, consumer: str) -> uuid.UUID:
        """The organization the audit row belongs to: the key's (the system organization's
        for a platform-wide consumer; the tenant wall lets an API session write no other)."""
        organization_id = self.client(request).organization_id
        if ":" in consumer:
            if pauses.owner_of(consumer) != organization_id:
                raise NotFound("No such consumer in this organization.")
            return organization_id
        if consumer not in {c.name for c in registry.all()}:
            raise NotFound("No such consumer.")
        if organization_id != SYSTEM_ORGANIZATION_ID:
            raise PermissionDenied(
                f"{consumer} is a platform-wide consumer: only a key of the platform's system "
                "organization may read or change its state."
            )
        return organization_id

    def act(
        self,
        request: Any,
        consumer: str,
        body: type[serializers.Serializer],
        action: Callable[..., bool],
    ) -> Response:
        """Run `services.consumer_pause` or `consumer_resume` for the key; answer the state."""
        organization_id = self.owner(request, consumer)
        data = self.validated(body, request.data)
        changed = action(
            consumer=consumer,
            actor=self.client(request).actor,
            reason=data["reason"],
            organization_id=organization_id,
        )
        return self.state(consumer, changed)

    def state(self, consumer: str, changed: bool | None = None) -> Response:
        row = pauses.state_of(consumer)
        body: dict[str, Any] = {
            "consumer": consumer,
            "state": row.state if row else "running",
            "since": row.since if row else None,
            "reason": row.reason if row else "",
            "changed_by": row.changed_by if row else "",
            "probe_at": row.probe_at if row else None,
        }
        if changed is not None:
            body["changed"] = changed
        return Response(ConsumerStateSerializer(body).data)


class ConsumerDetailView(ConsumerView):
    required_scopes = {"GET": scopes.CONSUMERS_READ}

    @extend_schema(
        operation_id="consumers_retrieve",
        summary="A consumer's state: running, paused, or its circuit breaker open / half-open",
        description=(
            "Whether the consumer's deliveries are being claimed: `running`, `paused` by an "
            "operator, or held by its circuit breaker (`open`, `half_open` while one probe "
            "delivery runs), since when, why and by whom. A webhook subscription is the consumer "
            "`webhook:<subscription id>` and is visible only to its organization's keys; a "
            "registered consumer only to keys of the system organization."
        ),
        parameters=[REQUEST_ID_PARAMETER],
        responses={
            200: ok(ConsumerStateSerializer, examples.CONSUMER_STATE),
            **errors(403, 404, e403=PLATFORM_ONLY),
        },
    )
    def get(self, request: Any, consumer: str) -> Response:
        self.owner(request, consumer)
        return self.state(consumer)


class ConsumerPauseView(ConsumerView):
    required_scopes = {"POST": scopes.CONSUMERS_WRITE}

    @extend_schema(
        operation_id="consumers_pause",
        summary="Pause a consumer: its deliveries stay pending, no attempt charged",
        description=(
            "Stops claiming the consumer's deliveries: new and retrying ones stay pending with "
            "no attempt charged, anything claimed but not started is released, running ones "
            "finish. A `reason` is required and recorded in the audit log. Pausing a consumer "
            "that is already paused changes nothing (`changed` is false)."
        ),
        request=PauseSerializer,
        examples=[request_example("Pause during a maintenance", examples.PAUSE_REQUEST)],
        parameters=[REQUEST_ID_PARAMETER],
        responses={
            200: ok(ConsumerStateSerializer, examples.PAUSED),
            **errors(400, 403, 404, 413, 415, e403=PLATFORM_ONLY),
        },
    )
    def post(self, request: Any, consumer: str) -> Response:
        return self.act(request, consumer, PauseSerializer, services.consumer_pause)


class ConsumerResumeView(ConsumerView):
    required_scopes = {"POST": scopes.CONSUMERS_WRITE}

    @extend_schema(
        operation_id="consumers_resume",
        summary="Resume a paused consumer (or one whose circuit breaker is open)",
        description=(
            "Claims the consumer's deliveries again and wakes idle workers at once, so the "
            "backlog drains without waiting for the next poll. Also closes an open circuit "
            "breaker by hand. Audited; resuming a running consumer changes nothing."
        ),
        request=ResumeSerializer,
        examples=[request_example("Resume after the maintenance", examples.RESUME_REQUEST)],
        parameters=[REQUEST_ID_PARAMETER],
        responses={
            200: ok(ConsumerStateSerializer, examples.RESUMED),
            **errors(400, 403, 404, 413, 415, e403=PLATFORM_ONLY),
        },
    )
    def post(self, request: Any, consumer: str) -> Response:
        return self.act(request, consumer, ResumeSerializer, services.consumer_resume)


class ReplaySerializer(StrictSerializer):
    since = serializers.DateTimeField(help_text="Start of the window (events emitted at or after).")
    until = serializers.DateTimeField(
        required=False, help_text="End of the window, exclusive (default: now)."
    )
    event_type = StrictCharField(
        required=False,
        max_length=200,
        help_text="Only this event type (one the consumer consumes).",
    )
    organization_id = serializers.UUIDField(
        required=False,
        help_text="System-organization keys only: replay one organization (default: all).",
    )
    reason = StrictCharField(max_length=2000, help_text="Why (kept in the audit trail).")
    dry_run = serializers.BooleanField(default=False, help_text="Count only; change nothing.")
    replay_id = serializers.UUIDField(
        required=False, help_text="Continue an earlier replay (nothing is queued twice)."
    )


class ReplayReportSerializer(serializers.Serializer):
    replay_id = serializers.UUIDField()
    consumer = serializers.CharField()
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    organization_id = serializers.UUIDField(allow_null=True)
    event_types = serializers.ListField(child=serializers.CharField())
    matched = serializers.IntegerField(help_text="Events in the window.")
    queued = serializers.IntegerField(help_text="Deliveries queued to run again.")
    left = serializers.IntegerField(
        help_text="Events not queued: pending or running already, or replayed under this id."
    )
    dry_run = serializers.BooleanField()
    by_status = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Dry run: the consumer's deliveries of the matched events by status.",
    )


class ConsumerReplayView(ApiView):
    required_scopes = {"POST": scopes.CONSUMERS_REPLAY}

    @extend_schema(
        operation_id="consumers_replay",
        summary="Replay a consumer over a time window (its deliveries run again)",
        description=(
            "Runs the consumer again over the events emitted in [`since`, `until`): each of its "
            "deliveries that is done, dead or discarded gets fresh attempts (a missing one is "
            "created), flagged with the replay's id; pending or running ones are left alone and "
            "no other consumer is touched. A key replays its own organization's events only; a "
            "key of the system organization may name one organization or replay all. Sending "
            "the same `replay_id` again queues nothing twice. Use `dry_run` to see what would "
            "run. Audited. Registered consumers only (to re-send webhooks, use event reprocess). "
            "A key without the `consumers:replay` scope is refused with 403."
        ),
        request=ReplaySerializer,
        examples=[request_example("Count a two-hour window first", examples.REPLAY_REQUEST)],
        parameters=[REQUEST_ID_PARAMETER],
        responses={
            200: ok(ReplayReportSerializer, examples.REPLAY_REPORT),
            **errors(
                400,
                403,
                404,
                413,
                415,
                e403="This API key lacks the scope 'consumers:replay' needed here.",
                e404="No such consumer.",
            ),
        },
    )
    def post(self, request: Any, consumer: str) -> Response:
        if registry.find(consumer) is None:
            raise NotFound("No such consumer.")
        client = self.client(request)
        data = self.validated(ReplaySerializer, request.data)
        organization_id: uuid.UUID | None = client.organization_id
        if organization_id == SYSTEM_ORGANIZATION_ID:
            organization_id = data.get("organization_id")
        elif "organization_id" in data:
            raise serializers.ValidationError(
                {"organization_id": ["Only keys of the system organization may name one."]}
            )
        try:
            target = replays.window(
                consumer=consumer,
                since=data["since"],
                until=data.get("until"),
                organization_id=organization_id,
                event_type=data.get("event_type"),
            )
            report = replays.replay(
                target,
                actor=client.actor,
                reason=data["reason"],
                replay_id=data.get("replay_id"),
                dry_run=data["dry_run"],
            )
        except replays.ReplayError as exc:
            raise serializers.ValidationError({"detail": [str(exc)]}) from None
        body = {
            "replay_id": report.replay_id,
            "consumer": consumer,
            "since": target.since,
            "until": target.until,
            "organization_id": target.organization_id,
            "event_types": report.event_types,
            "matched": report.matched,
            "queued": report.queued,
            "left": report.left,
            "dry_run": report.dry_run,
            "by_status": report.by_status,
        }
        return Response(ReplayReportSerializer(body).data)
