"""Data requests in the admin: due date and SLA countdown, a contact search box, no Save buttons
on the read-only page; and the Contacts admin it searches."""

from __future__ import annotations

import datetime as dt
import re

import pytest
import time_machine
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from core.models import Organization
from crm.models import Contact
from lgpd import services
from lgpd.models import DataRequest

pytestmark = pytest.mark.django_db
T0 = dt.datetime(2026, 11, 2, 12, 0, tzinfo=dt.UTC)
LIST = "/admin/lgpd/datarequest/"
CONTACTS = "/admin/crm/contact/"


@pytest.fixture
def admin_client(db: None) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("dpo", "dpo@example.com", "pw-not-used"))
    return client


def data_request(org: Organization, kind: str, *, name: str = "Ana Souza") -> DataRequest:
    contact = Contact.objects.create(organization=org, name=name, phone="+5511999990000")
    with time_machine.travel(T0, tick=False):
        return services.data_request_create(
            organization_id=org.pk,
            contact_id=contact.pk,
            kind=kind,
            channel=DataRequest.Channel.ADMIN,
            actor="user:dpo",
        )


def row_of(html: str, text: str) -> str:
    (row,) = [r for r in re.findall(r"<tr.*?</tr>", html, flags=re.S) if text in r]
    return row


def test_the_list_shows_due_dates_and_the_time_left(
    admin_client: Client, org: Organization
) -> None:
    data_request(org, "access", name="Ana Souza")  # due D+7
    data_request(org, "redact", name="Bruno Lima")  # due D+15
    with time_machine.travel(T0 + dt.timedelta(days=3, hours=2), tick=False):
        html = admin_client.get(LIST).content.decode()
    access, redact = row_of(html, "Ana Souza"), row_of(html, "Bruno Lima")
    assert "2026-11-09 12:00 UTC" in access and "3 d 22 h left" in access
    assert "2026-11-17 12:00 UTC" in redact and "11 d 22 h left" in redact


def test_an_open_request_past_its_due_date_is_overdue(
    admin_client: Client, org: Organization
) -> None:
    data_request(org, "access")
    with time_machine.travel(T0 + dt.timedelta(days=7, hours=5), tick=False):
        html = admin_client.get(LIST).content.decode()
    assert 'class="lgpd-sla lgpd-sla-overdue">overdue by 5 h 0 min<' in html


def test_a_completed_request_says_done(admin_client: Client, org: Organization) -> None:
    found = data_request(org, "access")
    DataRequest.objects.filter(pk=found.pk).update(completed_at=timezone.now(), status="done")
    assert "lgpd-sla-done" in admin_client.get(LIST).content.decode()


def test_the_read_only_request_page_has_no_save_buttons(
    admin_client: Client, org: Organization
) -> None:
    found = data_request(org, "access")
    html = admin_client.get(f"{LIST}{found.pk}/change/").content.decode()
    assert "Due" in html and "SLA" in html
    assert 'name="_save"' not in html and 'name="_continue"' not in html
    assert 'name="_addanother"' not in html


def test_the_add_form_searches_contacts(admin_client: Client, org: Organization) -> None:
    Contact.objects.create(organization=org, name="Carla Dias", email="carla@example.com")
    Contact.objects.create(organization=org, name="Davi Rocha", email="davi@example.com")
    html = admin_client.get(f"{LIST}add/").content.decode()
    assert "admin-autocomplete" in html and 'name="contact"' in html
    found = admin_client.get(
        "/admin/autocomplete/",
        {
            "term": "carla",
            "app_label": "lgpd",
            "model_name": "datarequest",
            "field_name": "contact",
        },
    ).json()
    assert [r["text"] for r in found["results"]] == ["Carla Dias"]


@pytest.mark.parametrize("term", ["souza", "+551199999", "ana@exa"])
def test_contacts_are_found_by_name_phone_or_email(
    admin_client: Client, org: Organization, term: str
) -> None:
    Contact.objects.create(
        organization=org, name="Ana Souza", phone="+5511999990000", email="ana@example.com"
    )
    Contact.objects.create(organization=org, name="Bruno Lima", phone="+5521888880000")
    response = admin_client.get(CONTACTS, {"q": term})
    assert [c.name for c in response.context["cl"].result_list] == ["Ana Souza"]


def test_contacts_show_their_redaction_state_and_are_read_only(
    admin_client: Client, org: Organization
) -> None:
    kept = Contact.objects.create(organization=org, name="Ana Souza")
    kept.cpf = "123.456.789-09"
    kept.save()
    Contact.objects.create(organization=org, name="", anonymized_at=T0)
    html = admin_client.get(CONTACTS).content.decode()
    assert "not redacted" in html and "redacted 2026-11-02 12:00 UTC" in html
    page = admin_client.get(f"{CONTACTS}{kept.pk}/change/").content.decode()
    assert "123.456.789-09" not in page and "on file (encrypted, not shown)" in page
    assert 'name="_save"' not in page and 'name="name"' not in page
    assert admin_client.get(f"{CONTACTS}add/").status_code == 403
