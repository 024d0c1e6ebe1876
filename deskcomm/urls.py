"""Top-level URL configuration."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from core.metrics import metrics_view
from core.shown_once import shown_once_view
from jobs.views import cron_run

admin.site.site_header = "Deskcomm operations"
admin.site.site_title = "Deskcomm"
admin.site.index_title = "Event bus and CRM records"

urlpatterns = [
    path("admin/ops/", include("eventbus.admin.urls")),  # before the admin's catch-all
    path(
        "admin/shown-once/<str:token>/",
        admin.site.admin_view(shown_once_view),
        name="admin-shown-once",
    ),
    path("admin/", admin.site.urls),
    path("api/v1/cron/<str:name>", cron_run, name="cron-run"),
    path("metrics", metrics_view, name="metrics"),
    path("lgpd/", include("lgpd.urls")),
    path("api/", include("deskcomm.api_urls")),
]

# Under /api/ these answer in the API's JSON error shape; elsewhere Django's pages.
handler400 = "core.api.errors.bad_request"
handler500 = "core.api.errors.server_error"
