"""Secret headers of pipeline definitions (pipelines.secrets): encrypted at rest, write-only in
the API, masked in the admin and in step excerpts; rendered URLs keep no query values."""

from __future__ import annotations

import types
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from core.models import Organization
from crm.services import order_confirm
from eventbus.store.models import EventLog
from pipelines import engine, secrets, services
from pipelines.context import order_context
from pipelines.models import Execution, Pipeline
from tests.support.api import api_client, error_of
from tests.support.pipelines import seed_example
from tests.support.receiver import Receiver

pytestmark = pytest.mark.django_db

TOKEN = "Bearer sk-live-4f9a1c"
SHOP_KEY = "shop-7731-secret-value"
HEADERS = {"Authorization": TOKEN, "X-Shop": SHOP_KEY, "X-Trace": "plain-value"}


def definition(url: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    found = seed_example(url)
    found["nodes"][1]["config"]["headers"] = dict(HEADERS if headers is None else headers)
    found["nodes"][1]["config"]["secretHeaders"] = ["X-Shop"]
    return found


def stored_text(pipeline_id: Any) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pipelines_pipeline::text FROM pipelines_pipeline WHERE id = %s",
                       [pipeline_id])  # fmt: skip
        return str(cursor.fetchone()[0])


def test_secret_headers_are_encrypted_at_rest_and_write_only_in_the_api(org: Organization) -> None:
    client = api_client(org, "pipelines:write")
    body = {"name": "ERP", "trigger": "order.post", "definition": definition("https://a.test/x")}
    created = client.post("/api/v1/pipelines", body, format="json")
    assert created.status_code == 201, created.content
    headers = created.json()["definition"]["nodes"][1]["config"]["headers"]
    assert headers == {
        "Authorization": secrets.MASK,
        "X-Shop": secrets.MASK,
        "X-Trace": "plain-value",
    }
    pipeline_id = created.json()["id"]
    row = stored_text(pipeline_id)
    assert TOKEN not in row and SHOP_KEY not in row and "plain-value" in row
    pipeline = Pipeline.objects.get(pk=pipeline_id)
    assert pipeline.secret_headers() == {"notify": {"Authorization": TOKEN, "X-Shop": SHOP_KEY}}
    read = client.get(f"/api/v1/pipelines/{pipeline_id}").content.decode()
    assert TOKEN not in read and SHOP_KEY not in read

    # Sending the masked definition back keeps the secrets; a new value replaces one.
    masked = created.json()["definition"]
    masked["nodes"][1]["config"]["headers"]["X-Shop"] = "rotated-shop-key"
    path = f"/api/v1/pipelines/{pipeline_id}"
    patched = client.patch(path, {"definition": masked}, format="json")
    assert patched.status_code == 200, patched.content
    pipeline.refresh_from_db()
    assert pipeline.secret_headers() == {
        "notify": {"Authorization": TOKEN, "X-Shop": "rotated-shop-key"}
    }

    # A mask with nothing stored behind it is a 400 on the node, and nothing changes.
    masked["nodes"][1]["config"]["headers"]["X-Api-Key"] = secrets.MASK
    error = error_of(
        client.patch(path, {"definition": masked}, format="json"),
        400,
        "validation_error",
    )
    assert "X-Api-Key" in error["fields"]["definition.notify"][0]
    pipeline.refresh_from_db()
    assert "X-Api-Key" not in pipeline.definition["nodes"][1]["config"]["headers"]


@pytest.mark.usefixtures("loopback_allowed")
def test_the_engine_sends_the_secrets_and_its_excerpts_mask_them(
    org: Organization, receiver: Receiver
) -> None:
    url = receiver.url("/orders") + "?token={{ 'q-secret-1' }}&number={{ orderNumber }}"
    pipeline = services.pipeline_create(
        organization=org, name="ERP", trigger="order.post", definition=definition(url), actor="t"
    )
    order = order_confirm(organization=org, number="S-1", total_cents=990)
    event = EventLog.objects.get(event_type="order.confirmed")
    engine.run(pipeline, context=order_context(event.payload), event_id=event.id, order_id=order.pk)
    (sent,) = [r for r in receiver.requests if r.path.startswith("/orders")]
    assert (sent.headers["authorization"], sent.headers["x-shop"]) == (TOKEN, SHOP_KEY)
    assert "token=q-secret-1" in sent.path
    step = Execution.objects.get(pipeline=pipeline).steps.get(node_id="notify")
    assert step.status == "SUCCEEDED", step.error
    for secret in (TOKEN, SHOP_KEY, "q-secret-1"):
        assert secret not in step.input_excerpt
    assert "?token=********&number=********" in step.input_excerpt
    assert "plain-value" in step.input_excerpt


def test_the_admin_shows_only_masks(org: Organization) -> None:
    pipeline = services.pipeline_create(
        organization=org,
        name="ERP",
        trigger="order.post",
        definition=definition("https://a.test/x"),
        actor="t",
    )
    client = Client()
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "pw-not-used"))
    page = client.get(f"/admin/pipelines/pipeline/{pipeline.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert TOKEN not in html and SHOP_KEY not in html and secrets.MASK in html


def test_the_migration_seals_plaintext_secret_headers_of_existing_rows(org: Organization) -> None:
    from importlib import import_module

    migration = import_module("pipelines.migrations.0002_pipeline_secret_headers")
    row = Pipeline.objects.create(
        organization=org,
        name="old",
        trigger="order.post",
        definition=definition("https://a.test/x", {"X-Api-Key": "old-plain-key", "X-Trace": "t"}),
    )
    migration.seal_existing(apps, types.SimpleNamespace(connection=connection))
    row.refresh_from_db()
    assert "old-plain-key" not in stored_text(row.pk)
    assert row.secret_headers() == {"notify": {"X-Api-Key": "old-plain-key"}}
    migration.unseal_existing(apps, types.SimpleNamespace(connection=connection))
    row.refresh_from_db()
    assert row.definition["nodes"][1]["config"]["headers"]["X-Api-Key"] == "old-plain-key"


def test_redact_url_keeps_names_and_drops_values() -> None:
    assert secrets.redact_url("https://u:p@h.test/a?k=1&api_key=z#frag") == (
        "https://********@h.test/a?k=********&api_key=********"
    )
    assert secrets.redact_url("https://h.test/a") == "https://h.test/a"
