"""Per-organization feature flags (core.flags): defaults, the one helper, validation, and the
admin screen that edits them with clear errors."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test import Client
from django.urls import reverse

from core.flag_state import enabled
from core.flags import FLAGS, validate_feature_flags
from core.models import Organization
from tests.support.admin import staff
from tests.support.factories import OrganizationFactory

pytestmark = pytest.mark.django_db
KNOWN = "ai_responder, pipelines, rag"


def test_a_flag_not_set_has_its_default_and_a_set_one_its_value() -> None:
    org = OrganizationFactory()
    assert all(enabled(org.pk, name) == flag.default for name, flag in FLAGS.items())
    Organization.objects.filter(pk=org.pk).update(feature_flags={"rag": False})
    assert enabled(org.pk, "rag") is False and enabled(org.pk, "ai_responder") is True
    with pytest.raises(KeyError):
        enabled(org.pk, "no_such_flag")  # a caller's typo fails loudly


def test_an_organization_inserted_by_sql_has_no_flags_set() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO deskcomm_organization (id, name, slug, created_at)"
            " VALUES (gen_random_uuid(), 'Raw', 'raw-org', now()) RETURNING id"
        )
        (org_id,) = cursor.fetchone()
    assert Organization.objects.get(pk=org_id).feature_flags == {}
    assert enabled(org_id, "pipelines") is True


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"rga": False}, f"Unknown feature flag(s): rga. Known flags: {KNOWN}."),
        ({"rag": "no"}, "Feature flag(s) rag must be true or false."),
        (["rag"], 'Feature flags must be a JSON object, e.g. {"rag": false}.'),
    ],
)
def test_bad_flags_are_refused_with_a_clear_message(value: object, message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        validate_feature_flags(value)
    assert raised.value.messages == [message]


def test_the_admin_edits_the_flags_and_refuses_unknown_ones(client: Client) -> None:
    org = OrganizationFactory(name="Loja", slug="loja")
    client.force_login(staff("ops", "core.view_organization", "core.change_organization"))
    url = reverse("admin:core_organization_change", args=[org.pk])
    page = client.get(url)
    assert "Flags in effect" in page.content.decode()
    assert "<code>ai_responder</code>: <strong>on</strong> (default)" in page.content.decode()
    form = {"name": "Loja", "slug": "loja"}
    bad = client.post(url, {**form, "feature_flags": '{"ai_responder": false, "rga": true}'})
    assert bad.status_code == 200
    assert "Unknown feature flag(s): rga." in bad.content.decode()
    org.refresh_from_db()
    assert org.feature_flags == {}  # nothing half-written
    good = client.post(url, {**form, "feature_flags": '{"ai_responder": false}'})
    assert good.status_code == 302
    assert enabled(org.pk, "ai_responder") is False
    shown = client.get(url).content.decode()
    assert "<code>ai_responder</code>: <strong>off</strong> —" in shown
