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

from rest_framework import serializers, status
from rest_framework.response import Response

from core.api.errors import InvalidState
from core.api.permissions import WriteImpliesRead
from core.api.schema import errors, ok, request_example, write_implies_read
from core.api.views import ApiView, found_or_404
from core.replica.routing import replica_view
from webhooks import selectors, services
from webhooks.api import examples
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

SUBSCRIBE_EXAMPLE = request_example("Leads and new contacts to a CRM", examples.SUBSCRIBE_REQUEST)
NOT_FOUND = "No such webhook subscription in this organization."
DISABLED_PING = "the subscription is disabled: enable it before a test ping"

scoped_operation = write_implies_read(WEBHOOKS_READ, WEBHOOKS_WRITE, tag="webhooks")


def operation(
    name: str,
    summary: str,
    *,
    description: str,
    parameters: Sequence[Any] = (),
    **kwargs: Any,
) -> Callable[[ViewMethod], ViewMethod]:
    """The operation's schema (core.api.schema.operation): a read (`get`) needs `webhooks:read`,
    which `webhooks:write` implies; anything else `webhooks:write`."""

    def decorate(method: ViewMethod) -> ViewMethod:
        scope = WEBHOOKS_READ if method.__name__ == "get" else WEBHOOKS_WRITE
        return scoped_operation(
            name, summary, description=description, scope=scope, parameters=parameters, **kwargs
        )(method)

    return decorate


class WebhookView(ApiView):
    permission_classes = [WriteImpliesRead]
    write_scope = WEBHOOKS_WRITE  # a key that may change these may read them
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
        summary="List webhook subscriptions",
        description="The organization's subscriptions, oldest first, with their URL, event "
        "types, state and failure count (never their secrets).",
        responses={
            200: ok(WebhookSubscriptionListSerializer, examples.SUBSCRIPTIONS),
            **errors(403),
        },
    )
    @replica_view
    def get(self, request: Any) -> Response:
        rows = selectors.subscription_list(organization=self.client(request).organization_id)
        return Response(WebhookSubscriptionListSerializer({"results": rows}).data)

    @operation(
        name="subscriptions_create",
        summary="Create a webhook subscription",
        description="Subscribes an HTTPS endpoint to event types (exact names, `entity.*` "
        "or `*`). The response carries the signing secret: it is shown this "
        "once, store it to verify signatures.",
        request=WebhookSubscriptionInputSerializer,
        examples=[SUBSCRIBE_EXAMPLE],
        responses={
            201: ok(WebhookSubscriptionSecretSerializer, examples.WITH_SECRET),
            **errors(400, 403, 413, 415),
        },
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
        summary="Get a webhook subscription",
        description="One subscription: URL, event types, enabled state, consecutive "
        "failures and why it was disabled, if it was. Never its secret.",
        responses={
            200: ok(WebhookSubscriptionSerializer, examples.SUBSCRIPTION),
            **errors(403, 404, e404=NOT_FOUND),
        },
    )
    def get(self, request: Any, subscription_id: uuid.UUID) -> Response:
        return Response(
            WebhookSubscriptionSerializer(self.subscription(request, subscription_id)).data
        )

    @operation(
        name="subscriptions_update",
        summary="Update a webhook subscription",
        description="Changes the URL, event types or description; fields left out "
        "stay as they are.",
        request=WebhookSubscriptionInputSerializer,
        examples=[request_example("Every contact event too", examples.UPDATE_REQUEST)],
        responses={
            200: ok(WebhookSubscriptionSerializer, examples.UPDATED),
            **errors(400, 403, 404, 413, 415, e404=NOT_FOUND),
        },
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
        summary="Delete a webhook subscription",
        description="Deletes the subscription; deliveries still waiting to be sent to "
        "it are dropped unsent.",
        responses={204: None, **errors(403, 404, e404=NOT_FOUND)},
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
        summary="Rotate a subscription's signing secret",
        description="Issues a new signing secret, shown once in the response. During the "
        "grace window deliveries are signed with both the new and the old "
        "secret, so receivers can switch without losing any.",
        request=None,
        responses={
            200: ok(WebhookSubscriptionSecretSerializer, examples.ROTATED),
            **errors(403, 404, e404=NOT_FOUND),
        },
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
        summary="Enable a webhook subscription",
        description="Turns a disabled subscription back on; its failure counter starts "
        "again from 0. Deliveries that already failed are not retried: resend "
        "them.",
        request=None,
        responses={
            200: ok(WebhookSubscriptionSerializer, examples.SUBSCRIPTION),
            **errors(403, 404, e404=NOT_FOUND),
        },
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
        summary="Disable a webhook subscription",
        description="Stops sending to the endpoint; new events are not delivered to it. "
        "Emits one `webhook.subscription_disabled` event.",
        request=None,
        responses={
            200: ok(WebhookSubscriptionSerializer, examples.DISABLED),
            **errors(403, 404, e404=NOT_FOUND),
        },
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
        summary="Send a test ping",
        description="Queues a signed `webhook.ping` event to this subscription only, to "
        "check the endpoint and its signature verification. It is sent within "
        "seconds; see it in the deliveries.",
        request=None,
        responses={
            202: ok(WebhookPingSerializer, examples.PING),
            **errors(403, 404, 409, e404=NOT_FOUND, e409=DISABLED_PING),
        },
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
        summary="List webhook deliveries",
        description="Deliveries to the organization's subscriptions, newest first, with "
        "their state and attempt count; filter by subscription or state.",
        parameters=[WebhookDeliveryFilterSerializer],
        responses={200: ok(WebhookDeliveryListSerializer, examples.DELIVERIES), **errors(400, 403)},
    )
    @replica_view
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
        summary="Get a webhook delivery",
        description="One delivery with every attempt: when, the HTTP status or connection "
        "error, and the response time.",
        responses={
            200: ok(WebhookDeliveryDetailSerializer, examples.DELIVERY_DETAIL),
            **errors(403, 404, e404="No such webhook delivery in this organization."),
        },
    )
    def get(self, request: Any, delivery_id: int) -> Response:
        delivery = self.delivery(request, delivery_id, with_attempts=True)
        return Response(WebhookDeliveryDetailSerializer(delivery).data)


class DeliveryResendView(WebhookView):
    @operation(
        name="deliveries_resend",
        summary="Resend a webhook delivery",
        description="Sends a delivered or failed delivery again, with the same delivery id "
        "(`webhook-id` header), so receivers that deduplicate by id see it "
        "once.",
        request=None,
        responses={
            202: ok(WebhookDeliverySerializer, examples.RESENT),
            **errors(
                403,
                404,
                409,
                e404="No such webhook delivery in this organization.",
                e409="the subscription is disabled: enable it before resending",
            ),
        },
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
