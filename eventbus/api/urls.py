"""Routes of the event bus API (included by deskcomm/api_urls.py). No trailing slashes."""

from __future__ import annotations

from django.urls import path

from eventbus.api import consumers, event_types, outbox, views

v1_urlpatterns = [
    path("event-types", event_types.EventTypesView.as_view(), name="event-types"),
    path("events", views.EventsView.as_view(), name="events"),
    path("events/<uuid:event_id>", views.EventDetailView.as_view(), name="event-detail"),
    path(
        "events/<uuid:event_id>/reprocess",
        views.EventReprocessView.as_view(),
        name="event-reprocess",
    ),
    path("events/<uuid:event_id>/discard", views.EventDiscardView.as_view(), name="event-discard"),
    path("consumers/<str:consumer>", consumers.ConsumerDetailView.as_view(), name="consumer"),
    path(
        "consumers/<str:consumer>/pause",
        consumers.ConsumerPauseView.as_view(),
        name="consumer-pause",
    ),
    path(
        "consumers/<str:consumer>/resume",
        consumers.ConsumerResumeView.as_view(),
        name="consumer-resume",
    ),
    path(
        "consumers/<str:consumer>/replay",
        consumers.ConsumerReplayView.as_view(),
        name="consumer-replay",
    ),
]

# Seed 004 names these without a version prefix: /api/outbox, /api/outbox/{id}/reprocess.
outbox_urlpatterns = [
    path("outbox", outbox.OutboxListView.as_view(), name="outbox"),
    path(
        "outbox/<uuid:event_id>/reprocess",
        outbox.OutboxReprocessView.as_view(),
        name="outbox-reprocess",
    ),
]
