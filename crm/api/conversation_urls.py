"""Conversation and analytics routes, mounted at /api/v1/ (deskcomm/api_urls.py). No trailing
slashes."""

from __future__ import annotations

from django.urls import path

from crm.api import conversations as views

urlpatterns = [
    path("conversations", views.ConversationsView.as_view(), name="conversations"),
    path(
        "conversations/<uuid:conversation_id>",
        views.ConversationDetailView.as_view(),
        name="conversation",
    ),
    path(
        "conversations/<uuid:conversation_id>/assign",
        views.ConversationAssignView.as_view(),
        name="conversation-assign",
    ),
    path(
        "conversations/<uuid:conversation_id>/resolve",
        views.ConversationResolveView.as_view(),
        name="conversation-resolve",
    ),
    path(
        "conversations/<uuid:conversation_id>/reopen",
        views.ConversationReopenView.as_view(),
        name="conversation-reopen",
    ),
    path("analytics/daily", views.AnalyticsDailyView.as_view(), name="analytics-daily"),
]
