"""The audit log in the admin: readable, searchable, never editable."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from core import audit, context
from core.models import AuditLog, Organization
from tests.support.admin import staff

pytestmark = pytest.mark.django_db

AUDIT = reverse("admin:core_auditlog_changelist")


@pytest.fixture
def auditor(client: Client) -> Client:
    client.force_login(staff("auditor", "core.view_auditlog"))
    return client


def write(org: Organization, target: str, request_id: str, reason: str = "why") -> None:
    with context.bind(request_id=request_id):
        audit.record(
            actor="user:ops",
            action="delivery.discard",
            target_type="eventbus.delivery",
            target_id=target,
            organization_id=org.pk,
            reason=reason,
        )


def test_lists_and_links_entries(auditor: Client, org: Organization) -> None:
    write(org, "41", "req-audit-1", reason="<i>duplicate</i>")
    html = auditor.get(AUDIT).content.decode()
    assert "user:ops" in html and "delivery.discard" in html
    assert reverse("admin:eventbus_delivery_change", args=["41"]) in html
    assert f"{reverse('eventbus_ops:correlation')}?request_id=req-audit-1" in html
    assert "<i>duplicate</i>" not in html and "&lt;i&gt;duplicate&lt;/i&gt;" in html


def test_search_is_exact(auditor: Client, org: Organization) -> None:
    write(org, "41", "req-audit-1")
    write(org, "42", "req-audit-2")
    found = auditor.get(f"{AUDIT}?q=req-audit-2").context["cl"].result_list
    assert [e.target_id for e in found] == ["42"]
    (by_target,) = auditor.get(f"{AUDIT}?q=41").context["cl"].result_list
    assert by_target.target_id == "41"
    assert not auditor.get(f"{AUDIT}?q=req-audit").context["cl"].result_list


def test_read_only_even_with_change_and_delete_permissions(
    client: Client, org: Organization
) -> None:
    write(org, "41", "req-audit-1")
    entry = AuditLog.objects.get()
    client.force_login(
        staff("root", "core.view_auditlog", "core.change_auditlog", "core.delete_auditlog")
    )
    change = reverse("admin:core_auditlog_change", args=[entry.pk])
    assert client.post(change, {"reason": "rewritten"}).status_code == 403
    assert client.get(reverse("admin:core_auditlog_add")).status_code == 403
    assert (
        client.post(
            reverse("admin:core_auditlog_delete", args=[entry.pk]), {"post": "yes"}
        ).status_code
        == 403
    )
    entry.refresh_from_db()
    assert entry.reason == "why"


def test_organization_page_links_into_the_bus(client: Client, org: Organization) -> None:
    client.force_login(staff("orgs", "core.view_organization"))
    html = client.get(reverse("admin:core_organization_changelist")).content.decode()
    assert f"{reverse('admin:eventbus_deadletter_changelist')}?organization={org.pk}" in html
