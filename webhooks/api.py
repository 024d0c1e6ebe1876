"""Webhook API (DRF): subscriptions CRUD, rotate secret, enable/disable, test ping; deliveries
list/detail with attempts, resend. Views parse, call one service or selector, format.

Authentication and the error shape are the integration API's (`deskcomm.api`): the caller is
`request.user`, an `ApiClient` whose organization is the tenant; reads need `webhooks:read` (or
`webhooks:write`), writes need `webhooks:write`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from deskcomm.api.authentication import ApiClient
from deskcomm.api.permissions import HasRequiredScope
from eventbus.models import DeliveryStatus
from webhooks import selectors, services
from webhooks.models import Attempt, Subscription, WebhookDelivery
from webhooks.scopes import WEBHOOKS_READ, WEBHOOKS_WRITE
from webhooks.signing import delivery_id

READ_SCOPE = WEBHOOKS_READ
WRITE_SCOPE = WEBHOOKS_WRITE
MAX_LIMIT = 200


class ScopePermission(HasRequiredScope):
    """Writes need `webhooks:write`; reads need `webhooks:read`, which `webhooks:write` implies."""

    def has_permission(self, request: Request, view: Any) -> bool:
        client = request.user
        if request.method in ("GET", "HEAD", "OPTIONS") and WRITE_SCOPE in getattr(
            client, "scopes", ()
        ):
            return True
        return super().has_permission(request, view)


def organization_id(request: Request) -> uuid.UUID:
    """The tenant comes from the credential, never from the body."""
    client: ApiClient = request.user
    return client.organization_id


def actor(request: Request) -> str:
    client: ApiClient = request.user
    return client.actor


class SubscriptionInput(serializers.Serializer):
    url = serializers.CharField(max_length=2000)
    event_types = serializers.ListField(child=serializers.CharField(max_length=200))
    description = serializers.CharField(max_length=500, required=False, allow_blank=True)


class WebhookView(APIView):
    permission_classes = [ScopePermission]
    required_scopes = {
        "GET": READ_SCOPE,
        "POST": WRITE_SCOPE,
        "PUT": WRITE_SCOPE,
        "PATCH": WRITE_SCOPE,
        "DELETE": WRITE_SCOPE,
    }

    def subscription(self, request: Request, pk: str) -> Subscription:
        found = selectors.subscription_get(
            organization=organization_id(request), subscription_id=pk
        )
        if found is None:
            raise NotFound("no such subscription")
        return found

    def delivery(self, request: Request, pk: str) -> WebhookDelivery:
        found = selectors.delivery_get(organization=organization_id(request), delivery_id=pk)
        if found is None:
            raise NotFound("no such webhook delivery")
        return found


class SubscriptionListView(WebhookView):
    def get(self, request: Request) -> Response:
        rows = selectors.subscription_list(organization=organization_id(request))
        return Response({"results": [subscription_data(s) for s in rows]})

    def post(self, request: Request) -> Response:
        data = _valid(SubscriptionInput(data=request.data))
        from deskcomm.models import Organization

        org = Organization.objects.get(pk=organization_id(request))
        with _invalid_as_400():
            subscription, secret = services.subscription_create(
                organization=org, actor=actor(request), **data
            )
        body = {**subscription_data(subscription), "secret": secret}
        return Response(body, status=status.HTTP_201_CREATED)


class SubscriptionDetailView(WebhookView):
    def get(self, request: Request, pk: str) -> Response:
        return Response(subscription_data(self.subscription(request, pk)))

    def patch(self, request: Request, pk: str) -> Response:
        subscription = self.subscription(request, pk)
        data = _valid(SubscriptionInput(data=request.data, partial=True))
        with _invalid_as_400():
            services.subscription_update(subscription=subscription, actor=actor(request), **data)
        return Response(subscription_data(subscription))

    def delete(self, request: Request, pk: str) -> Response:
        services.subscription_delete(
            subscription=self.subscription(request, pk), actor=actor(request)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class SubscriptionActionView(WebhookView):
    """POST .../{id}/rotate-secret | enable | disable | test."""

    def post(self, request: Request, pk: str, action: str) -> Response:
        subscription = self.subscription(request, pk)
        who = actor(request)
        if action == "rotate-secret":
            secret = services.subscription_rotate_secret(subscription=subscription, actor=who)
            return Response({**subscription_data(subscription), "secret": secret})
        if action == "enable":
            services.subscription_enable(subscription=subscription, actor=who)
        elif action == "disable":
            services.subscription_disable(
                subscription_id=subscription.id, actor=who, reason="disabled through the API"
            )
        else:  # "test": the URL pattern allows nothing else
            with _invalid_as_400():
                event = services.subscription_ping(subscription=subscription, actor=who)
            return Response({"event_id": str(event.id)}, status=status.HTTP_202_ACCEPTED)
        subscription.refresh_from_db()
        return Response(subscription_data(subscription))


class DeliveryListView(WebhookView):
    def get(self, request: Request) -> Response:
        params = request.query_params
        rows = selectors.delivery_list(
            organization=organization_id(request),
            subscription_id=_uuid_param(params.get("subscription")),
            status=_status_param(params.get("status")),
            before_id=_int_param("before", params.get("before"), default=None),
            limit=_int_param("limit", params.get("limit"), default=50, high=MAX_LIMIT),
        )
        return Response({"results": [delivery_data(d) for d in rows]})


class DeliveryDetailView(WebhookView):
    def get(self, request: Request, pk: str) -> Response:
        delivery = self.delivery(request, pk)
        attempts = [attempt_data(a) for a in selectors.attempts_of(delivery.pk)]
        return Response({**delivery_data(delivery), "attempts": attempts})


class DeliveryResendView(WebhookView):
    def post(self, request: Request, pk: str) -> Response:
        delivery = self.delivery(request, pk)
        with _invalid_as_400(code=status.HTTP_409_CONFLICT):
            services.delivery_resend(delivery=delivery, actor=actor(request))
        delivery.refresh_from_db()
        return Response(delivery_data(delivery), status=status.HTTP_202_ACCEPTED)


def subscription_data(s: Subscription) -> dict[str, Any]:
    return {
        "id": str(s.id),
        "url": s.url,
        "description": s.description,
        "event_types": s.event_types,
        "enabled": s.enabled,
        "consecutive_failures": s.consecutive_failures,
        "disabled_at": s.disabled_at,
        "disabled_reason": s.disabled_reason,
        "secret_rotation_ends_at": s.previous_secret_expires_at,
        "created_at": s.created_at,
    }


def delivery_data(d: WebhookDelivery) -> dict[str, Any]:
    sub_id = d.subscription_id
    return {
        "id": d.pk,
        "webhook_id": str(delivery_id(d.event_id, sub_id)) if sub_id else None,
        "subscription_id": str(sub_id) if sub_id else None,
        "event_id": str(d.event_id),
        "event_type": d.event.event_type,
        "status": d.status,
        "attempts": d.attempts,
        "next_attempt_at": d.next_attempt_at,
        "last_error": d.last_error,
        "created_at": d.created_at,
        "finished_at": d.finished_at,
    }


def attempt_data(a: Attempt) -> dict[str, Any]:
    return {
        "attempt": a.attempt,
        "at": a.created_at,
        "status_code": a.status_code,
        "duration_ms": a.duration_ms,
        "response_excerpt": a.response_excerpt,
        "error_class": a.error_class,
        "error": a.error,
    }


@contextmanager
def _invalid_as_400(code: int = status.HTTP_400_BAD_REQUEST) -> Iterator[None]:
    """Service input errors become a 4xx with the service's message; nothing was written."""
    try:
        yield
    except (services.InvalidSubscription, services.ResendRefused) as exc:
        error = ValidationError({"detail": str(exc)})
        error.status_code = code
        raise error from None


def _valid(serializer: serializers.Serializer) -> dict[str, Any]:
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def _uuid_param(value: str | None) -> uuid.UUID | None:
    if not value:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ValidationError({"subscription": "must be a subscription id (uuid)"}) from None


def _status_param(value: str | None) -> str | None:
    if value and value not in DeliveryStatus.values:
        raise ValidationError({"status": f"must be one of {', '.join(DeliveryStatus.values)}"})
    return value or None


def _int_param(name: str, value: str | None, *, default: int | None, high: int = 2**62) -> Any:
    if value is None or value == "":
        return default
    if not value.isdigit() or not 1 <= int(value) <= high:
        raise ValidationError({name: f"must be an integer between 1 and {high}"})
    return int(value)
