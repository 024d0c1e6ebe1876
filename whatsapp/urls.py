"""The WhatsApp app's routes, included under /api/ by deskcomm/api_urls.py."""

from __future__ import annotations

from django.urls import path

from whatsapp.views import waha_webhook

urlpatterns = [
    path("webhooks/waha/<str:session>", waha_webhook, name="waha-webhook"),
]
