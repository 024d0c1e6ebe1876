"""Webhook API routes, mounted at /api/v1/webhooks/ by deskcomm/urls.py."""

from __future__ import annotations

from django.urls import path, re_path

from webhooks import api

urlpatterns = [
    path("subscriptions", api.SubscriptionListView.as_view(), name="webhook-subscriptions"),
    path(
        "subscriptions/<uuid:pk>",
        api.SubscriptionDetailView.as_view(),
        name="webhook-subscription",
    ),
    re_path(
        r"^subscriptions/(?P<pk>[0-9a-f-]{36})/(?P<action>rotate-secret|enable|disable|test)$",
        api.SubscriptionActionView.as_view(),
        name="webhook-subscription-action",
    ),
    path("deliveries", api.DeliveryListView.as_view(), name="webhook-deliveries"),
    path("deliveries/<int:pk>", api.DeliveryDetailView.as_view(), name="webhook-delivery"),
    path(
        "deliveries/<int:pk>/resend",
        api.DeliveryResendView.as_view(),
        name="webhook-delivery-resend",
    ),
]
