"""Admin: adding a data request goes through the service (event + audit); afterwards read-only."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from core.models import AuditLog, Organization
from crm.models import Contact
from eventbus.store.models import EventLog
from lgpd.models import DataRequest

pytestmark = pytest.mark.django_db
ADD = "/admin/lgpd/datarequest/add/"


@pytest.fixture
def admin_client(db: None) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("dpo", "dpo@example.com", "pw-not-used"))
    return client


def test_adding_a_request_emits_and_audits(admin_client: Client, org: Organization) -> None:
    contact = Contact.objects.create(organization=org, name="Ana")
    response = admin_client.post(ADD, {"contact": contact.pk, "kind": "redact"})
    assert response.status_code == 302, response.content[:500]
    request = DataRequest.objects.get()
    assert (request.kind, request.channel, request.requested_by) == ("redact", "admin", "user:dpo")
    assert request.organization_id == org.pk
    event = EventLog.objects.get(event_type="lgpd.data_request_received")
    assert event.payload["channel"] == "admin"
    assert AuditLog.objects.get(action="lgpd.data_request.create").actor == "user:dpo"
    page = admin_client.get(f"/admin/lgpd/datarequest/{request.pk}/change/").content.decode()
    assert "Received at" in page and 'name="kind"' not in page  # read-only timeline
    delete = admin_client.get(f"/admin/lgpd/datarequest/{request.pk}/delete/")
    assert delete.status_code == 403


def test_bad_input_writes_nothing(admin_client: Client) -> None:
    response = admin_client.post(ADD, {"contact": "not-an-id", "kind": "burn"})
    assert response.status_code == 200
    assert not DataRequest.objects.exists() and not EventLog.objects.exists()
