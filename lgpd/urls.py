"""LGPD routes: the API (mounted at /api/v1/lgpd/, a contact's consents at /api/v1/contacts/)
and the e-mailed export link (/lgpd/)."""

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

# Mounted at /api/v1/.
contact_urlpatterns = [
    path(
        "contacts/<uuid:contact_id>/consents",
        api.ConsentsView.as_view(),
        name="contact-consents",
    ),
]

urlpatterns = [
    path("exports/<str:token>", views.export_download, name="lgpd-export-download"),
]
