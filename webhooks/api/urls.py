"""Webhook API routes, mounted at /api/v1/webhooks/ by deskcomm/api_urls.py. No trailing slashes.

One route per action (not `subscriptions/{id}/{action}`), so each has its own operation, request
and responses in the OpenAPI schema.
"""

from __future__ import annotations

from django.urls import path

from webhooks.api import views

SUBSCRIPTION = "subscriptions/<uuid:subscription_id>"
DELIVERY = "deliveries/<int:delivery_id>"

# One view per action on a subscription: POST subscriptions/<id>/<action>.
SUBSCRIPTION_ACTIONS = {
    "rotate-secret": views.SubscriptionRotateSecretView,
    "enable": views.SubscriptionEnableView,
    "disable": views.SubscriptionDisableView,
    "ping": views.SubscriptionPingView,
}

webhook_urlpatterns = [
    path("subscriptions", views.SubscriptionsView.as_view(), name="webhook-subscriptions"),
    path(SUBSCRIPTION, views.SubscriptionDetailView.as_view(), name="webhook-subscription"),
    *(
        path(f"{SUBSCRIPTION}/{action}", view.as_view(), name=f"webhook-subscription-{action}")
        for action, view in SUBSCRIPTION_ACTIONS.items()
    ),
    path("deliveries", views.DeliveriesView.as_view(), name="webhook-deliveries"),
    path(DELIVERY, views.DeliveryDetailView.as_view(), name="webhook-delivery"),
    path(f"{DELIVERY}/resend", views.DeliveryResendView.as_view(), name="webhook-delivery-resend"),
]
