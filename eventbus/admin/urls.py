"""URLs of the console pages outside the model admins (mounted at /admin/ops/)."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path

from eventbus.admin import views

app_name = "eventbus_ops"

urlpatterns = [
    path("status/", admin.site.admin_view(views.status_view), name="status"),
    path("correlation/", admin.site.admin_view(views.correlation_view), name="correlation"),
]
