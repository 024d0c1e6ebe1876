"""`/api/v1/webhooks/...`: subscriptions (CRUD, rotate secret, enable, disable, ping) and
deliveries (list, detail with attempts, resend), scoped to the API key's organization.

Views parse, call one service or selector, format. Reads need `webhooks:read` (or
`webhooks:write`, which implies it); writes need `webhooks:write`. Errors take the API's shape
(`core.api.errors`): service input errors are 400s on the field at fault, actions refused by
the object's state are 409 `invalid_state`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from core.api.errors import InvalidState
from core.api.permissions import HasRequiredScope
from core.api.schema import REQUEST_ID_PARAMETER, errors
from core.api.views import ApiView, found_or_404
from webhooks import selectors, services
from webhooks.api.serializers import (
    WebhookDeliveryDetailSerializer,
    WebhookDeliveryFilterSerializer,
    WebhookDeliveryListSerializer,
    WebhookDeliverySerializer,
    WebhookPingSerializer,
    WebhookSubscriptionInputSerializer,
    WebhookSubscriptionListSerializer,
    WebhookSubscriptionSecretSerializer,
    WebhookSubscriptionSerializer,
)
from webhooks.models import Subscription, WebhookDelivery
from webhooks.scopes import WEBHOOKS_READ, WEBHOOKS_WRITE

ViewMethod = TypeVar("ViewMethod", bound=Callable[..., Response])

READ_METHODS = ("GET", "HEAD")
SUBSCRIBE_EXAMPLE = OpenApiExample(
    "Leads and new contacts to a CRM",
    request_only=True,
    value={
        "url": "https://crm.example.com/deskcomm-hooks",
        "event_types": ["lead.*", "contact.created"],
        "description": "CRM sync",
    },
)
SCOPE_NOTES = {
    True: f"Scope: `{WEBHOOKS_READ}` (or `{WEBHOOKS_WRITE}`).",
    False: f"Scope: `{WEBHOOKS_WRITE}`.",
}


def operation(
    name: str, summary: str, *, parameters: Sequence[Any] = (), **kwargs: Any
) -> Callable[[ViewMethod], ViewMethod]:
    """`extend_schema` of a webhook operation: id `webhooks_<name>`, tag, scope, X-Request-ID."""

    def decorate(method: ViewMethod) -> ViewMethod:
        return extend_schema(
            operation_id=f"webhooks_{name}",
            summary=summary,
            description=SCOPE_NOTES[method.__name__ == "get"],
            tags=["webhooks"],
            parameters=[*parameters, REQUEST_ID_PARAMETER],
            **kwargs,
        )(method)

    return decorate


class ReadOrWriteScope(HasRequiredScope):
    """Reads need `webhooks:read`, or `webhooks:write`, which implies it; writes need the latter."""

    def has_permission(self, request: Any, view: Any) -> bool:
        scopes = getattr(request.user, "scopes", ())
        if request.method in READ_METHODS and WEBHOOKS_WRITE in scopes:
            return True
        return super().has_permission(request, view)


class WebhookView(ApiView):
    permission_classes = [ReadOrWriteScope]
    required_scopes = {
        "GET": WEBHOOKS_READ,
        "POST": WEBHOOKS_WRITE,
        "PATCH": WEBHOOKS_WRITE,
        "DELETE": WEBHOOKS_WRITE,
    }

    def subscription(self, request: Any, subscription_id: uuid.UUID) -> Subscription:
        """The organization's subscription; 404 for any other id (other tenants' too)."""
        found = selectors.subscription_get(
            organization=self.client(request).organization_id, subscription_id=subscription_id
        )
        return found_or_404(found, "No such webhook subscription in this organization.")

    def delivery(
        self, request: Any, delivery_id: int, *, with_attempts: bool = False
    ) -> WebhookDelivery:
        """The organization's webhook delivery; 404 for any other id (other tenants' too)."""
        found = selectors.delivery_get(
            organization=self.client(request).organization_id,
            delivery_id=delivery_id,
            with_attempts=with_attempts,
        )
        return found_or_404(found, "No such webhook delivery in this organization.")


class SubscriptionsView(WebhookView):
    @operation(
        name="subscriptions_list",
        summary="The organization's webhook subscriptions, oldest first",
        responses={200: WebhookSubscriptionListSerializer, **errors(403)},
    )
    def get(self, request: Any) -> Response:
        rows = selectors.subscription_list(organization=self.client(request).organization_id)
        return Response(WebhookSubscriptionListSerializer({"results": rows}).data)

    @operation(
        name="subscriptions_create",
        summary="Subscribe an endpoint to event types; the response shows the secret once",
        request=WebhookSubscriptionInputSerializer,
        examples=[SUBSCRIBE_EXAMPLE],
        responses={201: WebhookSubscriptionSecretSerializer, **errors(400, 403, 413, 415)},
    )
    def post(self, request: Any) -> Response:
        data = self.validated(WebhookSubscriptionInputSerializer, request.data)
        client = self.client(request)
        with service_errors():
            subscription, secret = services.subscription_create(
                organization=request.auth.organization,  # the key's, loaded with it
                actor=client.actor,
                **data,
            )
        return Response(_with_secret(subscription, secret), status=status.HTTP_201_CREATED)


class SubscriptionDetailView(WebhookView):
    @operation(
        name="subscriptions_retrieve",
        summary="One webhook subscription (never its secret)",
        responses={200: WebhookSubscriptionSerializer, **errors(403, 404)},
    )
    def get(self, request: Any, subscription_id: uuid.UUID) -> Response:
        return Response(
            WebhookSubscriptionSerializer(self.subscription(request, subscription_id)).data
        )

    @operation(
        name="subscriptions_update",
        summary="Change the URL, event types or description",
        request=WebhookSubscriptionInputSerializer,
        responses={200: WebhookSubscriptionSerializer, **errors(400, 403, 404, 413, 415)},
    )
    def patch(self, request: Any, subscription_id: uuid.UUID) -> Response:
        subscription = self.subscription(request, subscription_id)
        data = self.validated(WebhookSubscriptionInputSerializer, request.data, partial=True)
        with service_errors():
            services.subscription_update(
                subscription=subscription, actor=self.client(request).actor, **data
            )
        return Response(WebhookSubscriptionSerializer(subscription).data)

    @operation(
        name="subscriptions_delete",
        summary="Delete a subscription (its pending deliveries die unsent)",
        responses={204: None, **errors(403, 404)},
    )
    def delete(self, request: Any, subscription_id: uuid.UUID) -> Response:
        services.subscription_delete(
            subscription=self.subscription(request, subscription_id),
            actor=self.client(request).actor,
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class SubscriptionRotateSecretView(WebhookView):
    @operation(
        name="subscriptions_rotate_secret",
        summary="New signing secret (shown once); the old one also signs for the grace window",
        request=None,
        responses={200: WebhookSubscriptionSecretSerializer, **errors(403, 404)},
    )
    def post(self, request: Any, subscription_id: uuid.UUID) -> Response:
        subscription = self.subscription(request, subscription_id)
        secret = services.subscription_rotate_secret(
            subscription=subscription, actor=self.client(request).actor
        )
        return Response(_with_secret(subscription, secret))


class SubscriptionEnableView(WebhookView):
    @operation(
        name="subscriptions_enable",
        summary="Enable the subscription again (its failure counter starts from 0)",
        request=None,
        responses={200: WebhookSubscriptionSerializer, **errors(403, 404)},
    )
    def post(self, request: Any, subscription_id: uuid.UUID) -> Response:
        subscription = services.subscription_enable(
            subscription=self.subscription(request, subscription_id),
            actor=self.client(request).actor,
        )
        return Response(WebhookSubscriptionSerializer(subscription).data)


class SubscriptionDisableView(WebhookView):
    @operation(
        name="subscriptions_disable",
        summary="Disable the subscription (emits `webhook.subscription_disabled` once)",
        request=None,
        responses={200: WebhookSubscriptionSerializer, **errors(403, 404)},
    )
    def post(self, request: Any, subscription_id: uuid.UUID) -> Response:
        subscription = self.subscription(request, subscription_id)
        services.subscription_disable(
            subscription_id=subscription.id,
            actor=self.client(request).actor,
            reason="disabled through the API",
        )
        subscription.refresh_from_db()
        return Response(WebhookSubscriptionSerializer(subscription).data)


class SubscriptionPingView(WebhookView):
    @operation(
        name="subscriptions_ping",
        summary="Queue a `webhook.ping` to this subscription only (the webhook worker sends it)",
        request=None,
        responses={202: WebhookPingSerializer, **errors(403, 404, 409)},
    )
    def post(self, request: Any, subscription_id: uuid.UUID) -> Response:
        subscription = self.subscription(request, subscription_id)
        with service_errors():
            event = services.subscription_ping(
                subscription=subscription, actor=self.client(request).actor
            )
        return Response(WebhookPingSerializer({"event_id": event.id}).data, status=202)


class DeliveriesView(WebhookView):
    @operation(
        name="deliveries_list",
        summary="The organization's webhook deliveries, newest first",
        parameters=[WebhookDeliveryFilterSerializer],
        responses={200: WebhookDeliveryListSerializer, **errors(400, 403)},
    )
    def get(self, request: Any) -> Response:
        query = self.validated(WebhookDeliveryFilterSerializer, request.query_params.dict())
        rows = selectors.delivery_list(
            organization=self.client(request).organization_id,
            subscription_id=query.get("subscription"),
            status=query.get("status"),
            before_id=query.get("before"),
            limit=query.get("limit", 50),
        )
        return Response(WebhookDeliveryListSerializer({"results": rows}).data)


class DeliveryDetailView(WebhookView):
    @operation(
        name="deliveries_retrieve",
        summary="One webhook delivery with its attempt log",
        responses={200: WebhookDeliveryDetailSerializer, **errors(403, 404)},
    )
    def get(self, request: Any, delivery_id: int) -> Response:
        delivery = self.delivery(request, delivery_id, with_attempts=True)
        return Response(WebhookDeliveryDetailSerializer(delivery).data)


class DeliveryResendView(WebhookView):
    @operation(
        name="deliveries_resend",
        summary="Send a done or dead delivery again, with the same delivery id",
        request=None,
        responses={202: WebhookDeliverySerializer, **errors(403, 404, 409)},
    )
    def post(self, request: Any, delivery_id: int) -> Response:
        delivery = self.delivery(request, delivery_id)
        with service_errors():
            services.delivery_resend(delivery=delivery, actor=self.client(request).actor)
        delivery.refresh_from_db()
        return Response(WebhookDeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)


@contextmanager
def service_errors() -> Iterator[None]:
    """Bad input: 400 on the field at fault. Refused by the object's state: 409. Nothing written."""
    try:
        yield
    except services.InvalidSubscription as exc:
        raise serializers.ValidationError({exc.field: [str(exc)]}) from None
    except services.ActionRefused as exc:
        raise InvalidState(str(exc)) from None


def _with_secret(subscription: Subscription, secret: str) -> dict[str, Any]:
    """The subscription as WebhookSubscriptionSecretSerializer documents it: with its new secret."""
    return {**WebhookSubscriptionSerializer(subscription).data, "secret": secret}
