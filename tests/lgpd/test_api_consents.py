"""`/api/v1/contacts/<id>/consents` (lgpd.api.ConsentsView): record and list a contact's
consents, through `lgpd.services.consent_record` (with `lgpd.consent_changed`)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from core.models import Organization
from crm.models import ConsentRecord
from eventbus.store.models import EventLog
from tests.support.api import api_client, error_of, snapshot
from tests.support.factories import ContactFactory

pytestmark = pytest.mark.django_db

CONSENT = {"consent_type": "marketing_whatsapp", "granted": False, "evidence": "STOP by e-mail"}


def url(contact_id: object) -> str:
    return f"/api/v1/contacts/{contact_id}/consents"


def test_a_consent_is_recorded_with_its_event_and_listed_newest_first(org: Organization) -> None:
    contact = ContactFactory(organization=org)
    client = api_client(org, "consents:write")
    given = client.post(url(contact.pk), {**CONSENT, "granted": True}, format="json")
    withdrawn = client.post(url(contact.pk), CONSENT, format="json")
    assert (given.status_code, withdrawn.status_code) == (201, 201)
    assert (withdrawn.json()["granted"], withdrawn.json()["source"]) == (False, "api")
    listed = client.get(url(contact.pk)).json()["results"]
    assert [row["granted"] for row in listed] == [False, True]
    events = EventLog.objects.filter(event_type="lgpd.consent_changed").order_by("created_at")
    assert [e.payload["granted"] for e in events] == [True, False]
    assert all("STOP" not in str(e.payload) for e in events)  # no evidence in the event


def test_another_organizations_contact_is_a_404_and_nothing_is_written(
    org: Organization, org_b: Organization
) -> None:
    contact = ContactFactory(organization=org)
    intruder = api_client(org_b, "consents:write")
    before = snapshot()
    error_of(intruder.get(url(contact.pk)), 404, "not_found")
    error_of(intruder.post(url(contact.pk), CONSENT, format="json"), 404, "not_found")
    assert snapshot() == before and not ConsentRecord.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"granted": True}, "consent_type"),
        ({"consent_type": "Marketing WhatsApp", "granted": True}, "consent_type"),
        ({"consent_type": "x", "granted": "maybe"}, "granted"),
        ({**CONSENT, "contact_id": "x"}, "contact_id"),
        ({**CONSENT, "evidence": 5}, "evidence"),
    ],
)
def test_bad_input_is_a_400(org: Organization, body: dict, field: str) -> None:
    contact = ContactFactory(organization=org)
    response = api_client(org, "consents:write").post(url(contact.pk), body, format="json")
    assert field in error_of(response, 400, "validation_error")["fields"]
    assert not ConsentRecord.objects.exists()


def test_scopes_and_a_redacted_contact(org: Organization) -> None:
    contact = ContactFactory(organization=org)
    reader = api_client(org, "consents:read")
    assert reader.get(url(contact.pk)).status_code == 200
    refused = reader.post(url(contact.pk), CONSENT, format="json")
    assert "consents:write" in error_of(refused, 403, "permission_denied")["message"]
    error_of(api_client(org, "leads:read").get(url(contact.pk)), 403, "permission_denied")
    contact.anonymized_at = timezone.now()
    contact.save(update_fields=["anonymized_at"])
    writer = api_client(org, "consents:write")
    error_of(writer.post(url(contact.pk), CONSENT, format="json"), 409, "invalid_state")
    assert not ConsentRecord.objects.exists()
