"""Contact routes, mounted at /api/v1/ (deskcomm/api_urls.py). No trailing slashes."""

from __future__ import annotations

from django.urls import path

from crm.api import contacts

v1_urlpatterns = [
    path("contacts", contacts.ContactsView.as_view(), name="contacts"),
    path("contacts/<uuid:contact_id>", contacts.ContactDetailView.as_view(), name="contact"),
    path(
        "contacts/<uuid:contact_id>/merge",
        contacts.ContactMergeView.as_view(),
        name="contact-merge",
    ),
    path(
        "contacts/<uuid:contact_id>/block",
        contacts.ContactBlockView.as_view(),
        name="contact-block",
    ),
    path(
        "contacts/<uuid:contact_id>/unblock",
        contacts.ContactUnblockView.as_view(),
        name="contact-unblock",
    ),
]
