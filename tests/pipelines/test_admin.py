"""The pipelines admin: definition as JSON with errors by node, the SVG graph, executions with
their steps, and re-running a failed execution."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from core.models import AuditLog, Organization
from crm.models import Order
from crm.services import order_confirm
from eventbus.dispatch.relay import Relay, run_published
from eventbus.store.models import Delivery, EventLog
from pipelines import engine, graph, secrets, services
from pipelines.context import order_context
from pipelines.definition import parse
from pipelines.models import AllowedHost, Execution, Pipeline
from tests.support.api import api_client
from tests.support.pipelines import AUTHORED, DOS_TEMPLATES, seed_example
from tests.support.receiver import Receiver, Reply

pytestmark = pytest.mark.django_db

ADD = "/admin/pipelines/pipeline/add/"


@pytest.fixture
def admin_client(db: None) -> Client:
    user = User.objects.create_superuser("ops", "ops@example.com", "pw-not-used")
    client = Client()
    client.force_login(user)
    return client


def form(org: Organization, definition: Any, **extra: Any) -> dict[str, Any]:
    return {
        "organization": str(org.pk),
        "name": "ERP",
        "trigger": "order.post",
        "enabled": "on",
        "definition": json.dumps(definition),
        **extra,
    }


def test_an_invalid_definition_is_shown_with_its_errors_by_node(
    admin_client: Client, org: Organization
) -> None:
    bad = seed_example("https://erp.example.com/orders")
    bad["nodes"][1]["config"]["url"] = "ftp://erp.example.com"
    bad["edges"].append({"from": "ok", "to": "notify"})
    response = admin_client.post(ADD, form(org, bad))
    assert response.status_code == 200
    page = response.content.decode()
    assert "node &#x27;notify&#x27;: config.url must start with http:// or https://" in page
    assert "is part of a cycle" in page
    assert not Pipeline.objects.exists()


@pytest.mark.parametrize("source", DOS_TEMPLATES.values(), ids=DOS_TEMPLATES.keys())
def test_a_dos_template_is_a_form_error_on_its_node_not_a_500(
    admin_client: Client, org: Organization, source: str
) -> None:
    bad = seed_example(f"https://erp.example.com/{source}")
    response = admin_client.post(ADD, form(org, bad))
    assert response.status_code == 200
    assert "node &#x27;notify&#x27;: config.url: template" in response.content.decode()
    assert not Pipeline.objects.exists()


def test_a_valid_definition_is_saved_through_the_service_and_drawn(
    admin_client: Client, org: Organization
) -> None:
    AllowedHost.objects.create(organization=org, host="erp.example.com")
    response = admin_client.post(ADD, form(org, seed_example("https://erp.example.com/orders")))
    assert response.status_code == 302, response.content.decode()[:2000]
    pipeline = Pipeline.objects.get()
    assert AuditLog.objects.filter(action="pipeline.create", target_id=str(pipeline.pk)).exists()
    page = admin_client.get(f"/admin/pipelines/pipeline/{pipeline.pk}/change/").content.decode()
    assert "<svg" in page
    for node in ("start", "notify", "ok"):
        assert f'data-node="{node}"' in page
    assert 'data-from="notify" data-to="ok"' in page
    assert ">success</text>" in page
    assert (
        json.dumps(seed_example("https://erp.example.com/orders")).replace('"', "&quot;") in page
    )  # the definition as it was written

    second = admin_client.post(ADD, form(org, seed_example("https://erp.example.com/x")))
    assert second.status_code == 200
    assert "another enabled pipeline runs on order.post" in second.content.decode()


def test_the_layout_puts_each_node_after_its_predecessors() -> None:
    definition = {
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "c", "type": "condition"},
            {"id": "a", "type": "set-status"},
            {"id": "b", "type": "set-status"},
            {"id": "z", "type": "set-status"},
        ],
        "edges": [
            {"from": "start", "to": "c"},
            {"from": "c", "to": "a", "branch": "true"},
            {"from": "c", "to": "b", "branch": "false"},
            {"from": "a", "to": "z"},
            {"from": "start", "to": "z"},
        ],
    }
    placed = graph.layout(definition)
    assert placed == {"start": (0, 0), "c": (1, 0), "a": (2, 0), "b": (2, 1), "z": (3, 0)}
    svg = graph.render_svg({"nodes": [{"id": "x<script>", "type": "start"}], "edges": []})
    assert "<script>" not in svg and "x&lt;script&gt;" in svg


def erp_pipeline(org: Organization, receiver: Receiver) -> Pipeline:
    return services.pipeline_create(
        organization=org,
        name="ERP",
        trigger="order.post",
        definition=seed_example(receiver.url("/orders")),
        actor="test",
    )


def rerun(admin_client: Client, execution: Execution) -> Any:
    """The executions list's "re-run" action on one execution."""
    return admin_client.post(
        "/admin/pipelines/execution/",
        {"action": "rerun", "_selected_action": [str(execution.pk)]},
        follow=True,
    )


@pytest.mark.usefixtures("loopback_allowed")
def test_a_failed_execution_shows_its_steps_and_is_re_run(
    admin_client: Client, org: Organization, receiver: Receiver
) -> None:
    pipeline = erp_pipeline(org, receiver)
    order = order_confirm(organization=org, number="R-1", total_cents=700)
    event = EventLog.objects.get(event_type="order.confirmed")
    receiver.replies["/orders"] = Reply(status=500, body=b"nope")
    engine.run(pipeline, context=order_context(event.payload), event_id=event.id, order_id=order.pk)
    execution = Execution.objects.get()

    page = admin_client.get(f"/admin/pipelines/execution/{execution.pk}/change/").content.decode()
    assert "FAILED" in page and "HTTP 500" in page and " ms" in page
    assert 'data-node="notify"' in page and "#c62828" in page  # the failed node, in red
    assert 'name="_save"' not in page  # read-only: no save button

    receiver.replies["/orders"] = Reply(status=200)
    response = rerun(admin_client, execution)
    assert "re-run: SUCCEEDED" in response.content.decode()
    execution.refresh_from_db()
    assert (execution.status, execution.attempts) == ("SUCCEEDED", 2)
    order.refresh_from_db()
    assert order.status_tag == "success" and order.post_processed_at is not None
    again = rerun(admin_client, execution)
    assert "only a FAILED execution can be re-run" in again.content.decode()
    assert len(receiver.on("/orders")) == 2


def test_the_admin_lists_read_well(admin_client: Client, org: Organization) -> None:
    services.pipeline_create(
        organization=org,
        name="ERP",
        trigger="order.post",
        definition=seed_example("https://erp.example.com/orders"),
        actor="test",
    )
    for path in (
        "/admin/pipelines/pipeline/",
        "/admin/pipelines/execution/",
        "/admin/pipelines/allowedhost/",
        "/admin/pipelines/allowedhost/add/",
    ):
        assert admin_client.get(path).status_code == 200, path
    assert Order.objects.count() == 0


@pytest.mark.usefixtures("loopback_allowed", "side_effects")
def test_a_successful_re_run_takes_the_order_out_of_the_dlq_and_the_failed_outbox(
    admin_client: Client, org: Organization, receiver: Receiver
) -> None:
    """Issue 41 item 7: the re-run did the work the dead delivery was for."""
    pipeline = erp_pipeline(org, receiver)
    receiver.replies["/orders"] = Reply(status=500, body=b"nope")
    order = order_confirm(organization=org, number="R-7", total_cents=700)
    delivery = Delivery.objects.get(event__entity_id=order.pk, consumer="order-post-worker")
    Delivery.objects.filter(pk=delivery.pk).update(max_attempts=1)
    assert Relay(worker_id="t").run_once() >= 1  # published, then run as the broker would
    leased = Delivery.objects.get(pk=delivery.pk)
    assert run_published(delivery.pk, str(leased.lease_token)) == "failed"
    assert Delivery.objects.get(pk=delivery.pk).status == "dead"
    client = api_client(org, "outbox:read")
    assert [r["id"] for r in client.get("/api/outbox?status=FAILED").json()["results"]] == [
        str(delivery.event_id)
    ]
    execution = Execution.objects.get(pipeline=pipeline)

    receiver.replies["/orders"] = Reply(status=200)
    response = rerun(admin_client, execution)
    assert "re-run: SUCCEEDED" in response.content.decode()
    assert not Delivery.objects.filter(status="dead").exists()  # the DLQ
    assert client.get("/api/outbox?status=FAILED").json()["results"] == []
    (row,) = [
        r for r in client.get("/api/outbox").json()["results"] if r["id"] == str(delivery.event_id)
    ]
    assert row["status"] != "FAILED"  # PENDING while the event's other consumers run
    assert Delivery.objects.get(pk=delivery.pk).status == "discarded"
    [settled] = AuditLog.objects.filter(action="delivery.discard")
    assert str(execution.pk) in settled.reason and settled.actor.startswith("user:")


def textarea(page: str) -> str:
    found = re.search(r'<textarea name="definition"[^>]*>(.*?)</textarea>', page, re.S)
    assert found, page[:2000]
    return html.unescape(found.group(1)).strip("\n")


def test_the_editor_starts_with_a_valid_skeleton_not_null(admin_client: Client) -> None:
    shown = textarea(admin_client.get(ADD).content.decode())
    assert shown not in ("null", "{}")
    parse(json.loads(shown))  # valid as it stands


def test_a_host_off_the_allowlist_is_refused_at_save_naming_the_node_and_host(
    admin_client: Client, org: Organization
) -> None:
    refused = admin_client.post(ADD, {**form(org, {}), "definition": AUTHORED})
    page = refused.content.decode()
    assert refused.status_code == 200 and not Pipeline.objects.exists()
    assert (
        "node &#x27;notify&#x27;: host &#x27;erp.example.com&#x27; is not on this "
        "organization&#x27;s pipeline host allowlist"
    ) in page
    assert textarea(page) == AUTHORED  # the text comes back as typed, to fix

    AllowedHost.objects.create(organization=org, host="*.example.com")
    saved = admin_client.post(ADD, {**form(org, {}), "definition": AUTHORED})
    assert saved.status_code == 302 and Pipeline.objects.count() == 1
    templated = json.loads(AUTHORED)
    templated["nodes"][1]["config"]["url"] = "https://{{ order.shop }}/orders"  # run time's
    assert services.unlisted_hosts(org.pk, templated) == []


def test_the_definition_is_kept_as_the_author_wrote_it(
    admin_client: Client, org: Organization
) -> None:
    AllowedHost.objects.create(organization=org, host="erp.example.com")
    assert admin_client.post(ADD, {**form(org, {}), "definition": AUTHORED}).status_code == 302
    pipeline = Pipeline.objects.get()
    change = f"/admin/pipelines/pipeline/{pipeline.pk}/change/"
    assert textarea(admin_client.get(change).content.decode()) == AUTHORED
    assert list(pipeline.authored_definition) == ["nodes", "edges"]
    api = api_client(org, "pipelines:read").get(f"/api/v1/pipelines/{pipeline.pk}").json()
    assert list(api["definition"]) == ["nodes", "edges"]

    edited = AUTHORED.replace('"statusTag": "success"', '"statusTag": "integrated"')
    body = {"name": "ERP", "trigger": "order.post", "enabled": "on", "definition": edited}
    assert admin_client.post(change, body).status_code == 302
    pipeline.refresh_from_db()
    assert pipeline.definition_source == edited
    assert textarea(admin_client.get(change).content.decode()) == edited

    services.pipeline_update(pipeline, actor="test", definition=seed_example("https://x.test/a"))
    reindented = textarea(admin_client.get(change).content.decode())
    assert json.loads(reindented) == seed_example("https://x.test/a")
    assert reindented.index('"nodes"') < reindented.index('"edges"')  # the API body's order


def test_a_secret_header_value_never_reaches_the_kept_text(
    admin_client: Client, org: Organization
) -> None:
    AllowedHost.objects.create(organization=org, host="erp.example.com")
    secret = "sk-live-1234567890"  # pragma: allowlist secret
    written = AUTHORED.replace(
        '"method": "POST"}', f'"method": "POST", "headers": {{"Authorization": "{secret}"}}}}'
    )
    assert admin_client.post(ADD, {**form(org, {}), "definition": written}).status_code == 302
    pipeline = Pipeline.objects.get()
    assert secret not in pipeline.definition_source
    assert pipeline.definition_source == written.replace(secret, secrets.MASK)
    assert pipeline.secret_headers() == {"notify": {"Authorization": secret}}
    # Spelled with an escape, the value cannot be masked in place: the text is re-indented.
    escaped = written.replace(secret, "sk-live-\\u0031234567890")
    change = f"/admin/pipelines/pipeline/{pipeline.pk}/change/"
    body = {"name": "ERP", "trigger": "order.post", "enabled": "on", "definition": escaped}
    assert admin_client.post(change, body).status_code == 302
    pipeline.refresh_from_db()
    assert "1234567890" not in pipeline.definition_source
    assert json.loads(pipeline.definition_source) == pipeline.definition
