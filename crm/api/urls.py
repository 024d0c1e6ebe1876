"""CRM routes, mounted at /api/v1/ (deskcomm/api_urls.py). No trailing slashes."""

from __future__ import annotations

from django.urls import path

from crm.api import views

v1_urlpatterns = [
    path("leads", views.LeadsView.as_view(), name="leads"),
    path("leads/<uuid:lead_id>", views.LeadDetailView.as_view(), name="lead"),
    path("leads/<uuid:lead_id>/stage", views.LeadStageView.as_view(), name="lead-stage"),
    path("leads/<uuid:lead_id>/assign", views.LeadAssignView.as_view(), name="lead-assign"),
    path("leads/<uuid:lead_id>/won", views.LeadWonView.as_view(), name="lead-won"),
    path("leads/<uuid:lead_id>/lost", views.LeadLostView.as_view(), name="lead-lost"),
    path(
        "leads/<uuid:lead_id>/activities",
        views.LeadActivitiesView.as_view(),
        name="lead-activities",
    ),
    path(
        "contacts/<uuid:contact_id>/messages",
        views.ContactMessagesView.as_view(),
        name="contact-messages",
    ),
]
