"""The CRM admin: leads are written through crm.services (each change with its event), closed
won/lost through the SQL functions, soft-deleted; activities inline; consents read-only; every
page scoped to the staff user's organization."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from core.models import Organization
from crm.models import ConsentRecord, Lead, LeadActivity
from eventbus.store.models import EventLog
from lgpd import services as lgpd_services
from tests.support.admin import staff
from tests.support.factories import ContactFactory, LeadFactory

pytestmark = pytest.mark.django_db
LEADS = "/admin/crm/lead/"
LEAD_PERMISSIONS = (
    "crm.view_lead",
    "crm.add_lead",
    "crm.change_lead",
    "crm.delete_lead",
    "crm.add_leadactivity",
    "crm.view_leadactivity",
    "crm.view_consentrecord",
    "crm.view_contact",
)


@pytest.fixture
def seller(org: Organization) -> User:
    return staff("seller", organizations=[org])


@pytest.fixture
def manager(org: Organization) -> Client:
    """Staff of `org` only (organization-scoped), allowed to work leads."""
    client = Client()
    client.force_login(staff("manager", *LEAD_PERMISSIONS, organizations=[org]))
    return client


def change_data(lead: Lead, **changes: Any) -> dict[str, Any]:
    """The change form's POST: the lead's fields, no new activity, then `changes`."""
    data: dict[str, Any] = {
        "name": lead.name,
        "source": lead.source,
        "pipeline_id": lead.pipeline_id,
        "stage_id": lead.stage_id,
        "contact": str(lead.contact_id or ""),
        "owner": str(lead.owner_id or ""),
        "value_cents": "" if lead.value_cents is None else str(lead.value_cents),
        "activities-TOTAL_FORMS": "1",
        "activities-INITIAL_FORMS": "0",
        "activities-MIN_NUM_FORMS": "0",
        "activities-MAX_NUM_FORMS": "1000",
        "activities-0-kind": "note",
        "activities-0-note": "",
    }
    data.update(changes)
    return data


def types_of(lead: Lead | None = None) -> list[str]:
    rows = EventLog.objects.all() if lead is None else EventLog.objects.filter(entity_id=lead.pk)
    return sorted(rows.values_list("event_type", flat=True))


def test_a_lead_added_in_the_admin_is_created_with_its_event(
    manager: Client, org: Organization, seller: User
) -> None:
    contact = ContactFactory(organization=org)
    response = manager.post(
        f"{LEADS}add/",
        {
            **change_data(LeadFactory.build(organization=org, contact=contact)),
            "organization": str(org.pk),
            "name": "Loja da Ana",
            "owner": str(seller.pk),
            "value_cents": "5000",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    lead = Lead.objects.get()
    assert (lead.name, lead.owner_id, lead.value_cents) == ("Loja da Ana", seller.pk, 5000)
    assert types_of(lead) == ["lead.created"]


def test_changing_a_lead_fires_each_changes_event_and_records_the_activity(
    manager: Client, org: Organization, seller: User
) -> None:
    lead = LeadFactory(organization=org)
    url = f"{LEADS}{lead.pk}/change/"
    page = manager.get(url)
    assert page.status_code == 200 and "Mark won" in page.content.decode()
    response = manager.post(
        url,
        change_data(
            lead,
            name="Renamed",
            stage_id="proposal",
            owner=str(seller.pk),
            **{"activities-0-kind": "call", "activities-0-note": "Ligou"},
        ),
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    lead.refresh_from_db()
    assert (lead.name, lead.stage_id, lead.owner_id) == ("Renamed", "proposal", seller.pk)
    assert LeadActivity.objects.get().note == "Ligou"
    assert types_of(lead) == [
        "lead.assigned",
        "lead.stage_changed",
        "lead.updated",
        "lead_activity.recorded",
    ]


def test_an_owner_outside_the_organization_is_a_form_error(
    manager: Client, org: Organization, org_b: Organization
) -> None:
    lead = LeadFactory(organization=org)
    outsider = staff("outsider", organizations=[org_b])
    response = manager.post(f"{LEADS}{lead.pk}/change/", change_data(lead, owner=str(outsider.pk)))
    assert response.status_code == 200  # the form again, with the error
    lead.refresh_from_db()
    assert lead.owner_id is None and not EventLog.objects.exists()


def test_won_and_lost_go_through_the_sql_functions(manager: Client, org: Organization) -> None:
    won, lost = LeadFactory(organization=org), LeadFactory(organization=org)
    assert manager.get(f"{LEADS}{won.pk}/won/").status_code == 200
    response = manager.post(f"{LEADS}{won.pk}/won/", {"value_cents": "9900", "reason": "ok"})
    assert response.status_code == 302
    refused = manager.post(f"{LEADS}{lost.pk}/lost/", {"reason": ""})
    assert refused.status_code == 200 and "reason is required" in refused.content.decode()
    assert manager.post(f"{LEADS}{lost.pk}/lost/", {"reason": "price"}).status_code == 302
    won.refresh_from_db()
    lost.refresh_from_db()
    assert (won.status, won.value_cents, lost.status) == ("won", 9900, "lost")
    assert types_of() == ["lead.lost", "lead.won"]
    again = manager.post(f"{LEADS}{won.pk}/lost/", {"reason": "late"}, follow=True)
    assert "already won" in again.content.decode()
    assert types_of() == ["lead.lost", "lead.won"]


def test_delete_is_the_soft_delete(manager: Client, org: Organization) -> None:
    lead = LeadFactory(organization=org)
    response = manager.post(f"{LEADS}{lead.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    lead.refresh_from_db()
    assert lead.deleted_at is not None and lead.deleted_by == "user:manager"
    assert types_of(lead) == ["lead.deleted"]
    assert f"{LEADS}{lead.pk}/change/" not in manager.get(LEADS).content.decode()


def test_the_list_filters_by_stage_and_owner_and_shows_only_the_organizations_leads(
    manager: Client, org: Organization, org_b: Organization, seller: User
) -> None:
    mine = LeadFactory(organization=org, stage_id="proposal", owner=seller, name="Ours")
    LeadFactory(organization=org, stage_id="new", name="Other stage")
    theirs = LeadFactory(organization=org_b, stage_id="proposal", name="Theirs")
    page = manager.get(LEADS, {"stage_id": "proposal", "owner__id__exact": seller.pk})
    html = page.content.decode()
    assert page.status_code == 200
    assert "Ours" in html and "Other stage" not in html and "Theirs" not in html
    assert manager.get(f"{LEADS}{theirs.pk}/change/").status_code in (302, 404)
    assert manager.post(f"{LEADS}{theirs.pk}/won/", {}).status_code == 404
    theirs.refresh_from_db()
    assert theirs.status == "open" and mine.status == "open"


def test_consents_are_listed_read_only(manager: Client, org: Organization) -> None:
    contact = ContactFactory(organization=org)
    lgpd_services.consent_record(
        contact=contact, consent_type="marketing_whatsapp", granted=False, source="api"
    )
    page = manager.get("/admin/crm/consentrecord/")
    assert page.status_code == 200 and "marketing_whatsapp" in page.content.decode()
    record = ConsentRecord.objects.get()
    change = manager.get(f"/admin/crm/consentrecord/{record.pk}/change/")
    assert change.status_code == 200 and 'name="_save"' not in change.content.decode()
