"""Webhook API routes, mounted at /api/v1/webhooks/ by deskcomm/api/urls.py. No trailing slashes.

One route per action (not `subscriptions/{id}/{action}`), so each has its own operation, request
and responses in the OpenAPI schema.
"""

from __future__ import annotations

from django.urls import path

from webhooks.api import views

SUBSCRIPTION = "subscriptions/<uuid:subscription_id>"
DELIVERY = "deliveries/<int:delivery_id>"

webhook_urlpatterns = [
    path("subscriptions", views.SubscriptionsView.as_view(), name="webhook-subscriptions"),
    path(SUBSCRIPTION, views.SubscriptionDetailView.as_view(), name="webhook-subscription"),
    path(
        f"{SUBSCRIPTION}/rotate-secret",
        views.SubscriptionRotateSecretView.as_view(),
        name="webhook-subscription-rotate-secret",
    ),
    path(
        f"{SUBSCRIPTION}/enable",
        views.SubscriptionEnableView.as_view(),
        name="webhook-subscription-enable",
    ),
    path(
        f"{SUBSCRIPTION}/disable",
        views.SubscriptionDisableView.as_view(),
        name="webhook-subscription-disable",
    ),
    path(
        f"{SUBSCRIPTION}/ping",
        views.SubscriptionPingView.as_view(),
        name="webhook-subscription-ping",
    ),
    path("deliveries", views.DeliveriesView.as_view(), name="webhook-deliveries"),
    path(DELIVERY, views.DeliveryDetailView.as_view(), name="webhook-delivery"),
    path(f"{DELIVERY}/resend", views.DeliveryResendView.as_view(), name="webhook-delivery-resend"),
]
