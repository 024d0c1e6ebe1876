"""What the core admin shows of the apps above core comes from what they registered
(core.admin_links, core.restore_scope), not from names core spells out."""

from __future__ import annotations

import pytest
from django.urls import reverse

from core import admin_links, restore_scope
from core.admin import AuditLogAdmin, OrganizationAdmin, audit_target
from core.models import AuditLog, Organization

pytestmark = pytest.mark.django_db


def test_an_organization_links_to_the_pages_the_bus_registered_then_its_audit(
    org: Organization,
) -> None:
    html = OrganizationAdmin(Organization, admin_site=None).bus_links(org)  # type: ignore[arg-type]
    query = f"?organization={org.pk}"
    assert html == (
        f'<a href="{reverse("admin:eventbus_eventlog_changelist")}{query}">events</a> · '
        f'<a href="{reverse("admin:eventbus_deadletter_changelist")}{query}">dead letters</a> · '
        f'<a href="{reverse("admin:core_auditlog_changelist")}{query}">audit</a>'
    )
    labels = [link.label for link in admin_links.organization_links()]
    assert labels == ["events", "dead letters"]


def test_an_audit_entry_links_to_its_delivery_and_its_request(org: Organization) -> None:
    entry = AuditLog(
        organization=org, target_type="eventbus.delivery", target_id="42", request_id="req-1"
    )
    url = reverse("admin:eventbus_delivery_change", args=["42"])
    assert audit_target(entry) == f'<a href="{url}">delivery 42</a>'
    other = AuditLog(organization=org, target_type="consumer", target_id="ai-response-worker")
    assert audit_target(other) == "consumer:ai-response-worker"
    link = AuditLogAdmin(AuditLog, admin_site=None).request(entry)  # type: ignore[arg-type]
    assert link == f'<a href="{reverse("eventbus_ops:correlation")}?request_id=req-1">req-1</a>'


def test_a_restore_is_checked_on_the_tables_of_the_apps_that_registered() -> None:
    assert set(restore_scope.labels()) == {"core", "jobs", "crm", "eventbus", "webhooks"}
