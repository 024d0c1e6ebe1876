"""Nuvemshop routes: the webhook receiver (under /api/) and the admin's install pages."""

from __future__ import annotations

from django.urls import path

from nuvemshop import views

webhook_urlpatterns = [
    path("<path:event>", views.webhook_receive, name="nuvemshop-webhook"),
]

install_urlpatterns = [
    path("connect/", views.connect, name="nuvemshop-connect"),
    path("callback/", views.callback, name="nuvemshop-callback"),
]
