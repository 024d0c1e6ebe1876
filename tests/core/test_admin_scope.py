"""Organization-scoped staff (core.admin_scope): a staff user bound to organization A sees and
acts on nothing of B in any admin screen, because their requests run with A's row-level
security scope; superusers and platform operators see every organization."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission, User
from django.db import models
from django.test import Client, RequestFactory
from django.urls import NoReverseMatch, reverse

from core import rls
from core.admin_scope import OrganizationScopedAdmin, organization_path
from core.models import Organization, StaffOrganization
from crm.models import Contact
from eventbus.store.models import EventLog
from pipelines.models import AllowedHost
from tests.support.admin import staff
from tests.support.roles import web_process
from tests.support.tenant_rows import seed

pytestmark = pytest.mark.django_db


def every_view_permission() -> list[str]:
    rows = Permission.objects.filter(codename__startswith="view_")
    return [
        f"{app}.{code}" for app, code in rows.values_list("content_type__app_label", "codename")
    ]


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def admin_url(model: type[models.Model], view: str, *args: Any) -> str:
    meta = model._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_{view}", args=args)


def rows_of(model: type[models.Model], organization: Organization) -> list[Any]:
    """Up to 3 of `organization`'s rows that the model's admin shows someone who sees all."""
    path = organization_path(model)
    assert path is not None
    request = RequestFactory().get("/admin/")
    request.user = User(username="all", is_staff=True, is_superuser=True, is_active=True)
    shown = admin.site._registry[model].get_queryset(request)  # DeadLetter: the dead ones
    return list(shown.filter(**{path: organization.pk}).values_list("pk", flat=True)[:3])


def test_staff_of_a_sees_nothing_of_b_on_every_changelist_and_detail_page(
    enforced: None, org: Organization, org_b: Organization
) -> None:
    seed(org)
    seed(org_b)
    client = logged_in(staff("scoped", *every_view_permission(), organizations=[org]))
    covered, refused = [], []
    for model in admin.site._registry:
        changelist = client.get(admin_url(model, "changelist"))
        path = organization_path(model)
        if changelist.status_code == 403:
            # Platform-wide models (users, jobs, schedules) and the bindings themselves.
            assert path is None or model is StaffOrganization, model
            refused.append(model._meta.label)
            continue
        assert changelist.status_code == 200, (model, changelist.status_code)
        assert path is not None, f"{model._meta.label}: a platform-wide model is shown"
        theirs, mine = rows_of(model, org_b), rows_of(model, org)
        html = changelist.content.decode()
        for pk in theirs:
            try:
                url = admin_url(model, "change", quote(pk))
            except NoReverseMatch:
                continue
            assert url not in html, (model, pk)
            detail = client.get(url)
            assert detail.status_code in (302, 404), (model, pk, detail.status_code)
            if detail.status_code == 302:  # Django's "does not exist" redirect to the index
                assert detail["Location"] == reverse("admin:index")
        for pk in mine:
            assert client.get(admin_url(model, "change", quote(pk))).status_code == 200, model
        if theirs and mine:
            covered.append(model._meta.label)
    assert len(covered) >= 12, covered
    assert {"auth.User", "jobs.JobRun"} <= set(refused)


def test_the_database_scope_holds_when_a_screen_forgets_its_filter(
    enforced: None, org: Organization, org_b: Organization, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(org)
    seed(org_b)
    # Take the admin's own filter away: what is left is the request's row-level security scope.
    monkeypatch.setattr(
        OrganizationScopedAdmin,
        "get_queryset",
        lambda self, request: self.model._default_manager.all(),
    )
    user = staff("scoped", "crm.view_contact", "eventbus.view_eventlog", organizations=[org])
    client = logged_in(user)
    for model in (Contact, EventLog):
        html = client.get(admin_url(model, "changelist")).content.decode()
        for pk in rows_of(model, org_b):
            assert admin_url(model, "change", quote(pk)) not in html
        for pk in rows_of(model, org):
            assert admin_url(model, "change", quote(pk)) in html


NAMES = ("customer of acme", "customer of beta", "customer of cobalt")  # what the tests make


def contact_names(client: Client) -> set[str]:
    """Which of the tests' contacts the contact changelist shows (not read from the database
    here: in a web process this thread's own session sees nothing)."""
    response = client.get(admin_url(Contact, "changelist"))
    assert response.status_code == 200
    return {name for name in NAMES if name in response.content.decode()}


def test_superusers_and_platform_operators_see_every_organization(
    enforced: None, org: Organization, org_b: Organization
) -> None:
    Contact.objects.create(organization=org, name="customer of acme")
    Contact.objects.create(organization=org_b, name="customer of beta")
    superuser = User.objects.create_superuser("root", password="pw-Root-1")
    both = {"customer of acme", "customer of beta"}
    assert contact_names(logged_in(superuser)) == both
    assert contact_names(logged_in(staff("operator", "crm.view_contact"))) == both
    scoped = staff("scoped", "crm.view_contact", organizations=[org])
    assert contact_names(logged_in(scoped)) == {"customer of acme"}
    unbound = staff("unbound", "crm.view_contact", organizations=[])
    assert contact_names(logged_in(unbound)) == set()


def test_a_staff_user_bound_to_two_organizations_works_in_one_at_a_time(
    enforced: None, org: Organization, org_b: Organization
) -> None:
    org_c = Organization.objects.create(name="Cobalt", slug="cobalt")
    for organization in (org, org_b, org_c):
        Contact.objects.create(organization=organization, name=f"customer of {organization.slug}")
    client = logged_in(staff("two", "crm.view_contact", organizations=[org, org_c]))
    assert contact_names(client) == {"customer of acme"}  # the first by name
    page = client.get("/admin/organization/")
    assert page.status_code == 200
    assert b"Acme" in page.content and b"Cobalt" in page.content and b"Beta" not in page.content
    assert client.post("/admin/organization/", {"organization": org_c.pk}).status_code == 302
    assert contact_names(client) == {"customer of cobalt"}
    assert client.post("/admin/organization/", {"organization": org_b.pk}).status_code == 400
    assert contact_names(client) == {"customer of cobalt"}


def test_a_scoped_staff_user_cannot_create_rows_in_another_organization(
    enforced: None, org: Organization, org_b: Organization
) -> None:
    user = staff("scoped", "pipelines.add_allowedhost", organizations=[org])
    client = logged_in(user)
    form = client.get(admin_url(AllowedHost, "add")).content.decode()
    assert str(org.pk) in form and str(org_b.pk) not in form
    post = {"organization": org_b.pk, "host": "api.example.com"}
    response = client.post(admin_url(AllowedHost, "add"), post)
    assert response.status_code == 200 and b"Select a valid choice" in response.content
    assert not AllowedHost.objects.exists()
    post["organization"] = org.pk
    assert client.post(admin_url(AllowedHost, "add"), post).status_code == 302
    assert list(AllowedHost.objects.values_list("organization_id", flat=True)) == [org.pk]


def test_the_nuvemshop_connect_page_needs_its_permission_and_lists_only_the_users_organizations(
    org: Organization, org_b: Organization
) -> None:
    url = reverse("nuvemshop-connect")
    assert logged_in(staff("nobody", organizations=[org])).get(url).status_code == 403
    client = logged_in(staff("installer", "nuvemshop.connect_store", organizations=[org]))
    page = client.get(url)
    assert page.status_code == 200
    assert str(org.pk) in page.content.decode() and str(org_b.pk) not in page.content.decode()
    refused = client.post(url, {"organization": org_b.pk})
    assert refused.status_code == 200 and b"Select a valid choice" in refused.content
    operator = logged_in(staff("operator", "nuvemshop.connect_store"))
    assert str(org_b.pk) in operator.get(url).content.decode()


@pytest.mark.django_db(transaction=True)
def test_in_a_web_process_scoped_staff_run_on_the_web_role_with_their_tenant(
    enforced: None, org: Organization, org_b: Organization, django_db_blocker: Any
) -> None:
    """As deployed (web role, platform alias as the worker role): the bindings are read on the
    platform connection, then the request runs on the web role's own, proven to A."""
    Contact.objects.create(organization=org, name="customer of acme")
    Contact.objects.create(organization=org_b, name="customer of beta")
    scoped = staff("scoped", "crm.view_contact", organizations=[org])
    operator = staff("operator", "crm.view_contact")
    with web_process(django_db_blocker):
        assert contact_names(logged_in(scoped)) == {"customer of acme"}
        assert not rls.on_platform()
        assert contact_names(logged_in(operator)) == {"customer of acme", "customer of beta"}
        assert not rls.on_platform()


def test_the_console_pages_show_only_the_users_organization_and_refuse_platform_ones(
    enforced: None, org: Organization, org_b: Organization
) -> None:
    seed(org)
    seed(org_b)
    permissions = ("eventbus.view_delivery", "eventbus.view_eventlog", "core.view_auditlog")
    permissions += ("core.view_workerprocess", "eventbus.view_consumerstate", "jobs.view_jobrun")
    scoped = logged_in(staff("scoped", *permissions, organizations=[org]))
    operator = logged_in(staff("operator", *permissions))
    for path in ("/admin/ops/status/", "/admin/ops/status/?organization=" + str(org_b.pk)):
        mine, everyone = scoped.get(path), operator.get(path)
        assert mine.status_code == everyone.status_code == 200
        assert b"Beta" in everyone.content and b"Beta" not in mine.content
    for path in ("/admin/ops/workers/", "/admin/ops/consumers/", "/admin/jobs/queues/"):
        assert scoped.get(path).status_code == 403, path
        assert operator.get(path).status_code == 200, path
