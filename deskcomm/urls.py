"""Top-level URL configuration."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

admin.site.site_header = "Deskcomm operations"
admin.site.site_title = "Deskcomm"
admin.site.index_title = "Event bus and CRM records"

urlpatterns = [
    path("admin/ops/", include("eventbus.admin.urls")),  # before the admin's catch-all
    path("admin/", admin.site.urls),
]
