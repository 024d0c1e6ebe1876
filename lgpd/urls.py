"""LGPD routes: the API (mounted at /api/v1/lgpd/) and the e-mailed export link (/lgpd/)."""

from __future__ import annotations

from django.urls import path

from lgpd import api, views

api_urlpatterns = [
    path("data-requests", api.DataRequestsView.as_view(), name="lgpd-data-requests"),
    path(
        "data-requests/<uuid:request_id>",
        api.DataRequestDetailView.as_view(),
        name="lgpd-data-request",
    ),
    path(
        "data-requests/<uuid:request_id>/export",
        api.DataRequestExportView.as_view(),
        name="lgpd-data-request-export",
    ),
]

urlpatterns = [
    path("exports/<str:token>", views.export_download, name="lgpd-export-download"),
]
