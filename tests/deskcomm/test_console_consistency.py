"""The console names things one way: one audit actor format (`user:<name>`) whatever the page,
proper model names, "View" and no History button on read-only pages, and the AI usage page
shows the open day's spend beside the finished days."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

import eventbus
from ai.budget import local_today
from ai.models import AiAccount, AiUsageDaily
from core.models import AuditLog, Organization
from eventbus.store.models import Delivery
from pipelines.models import Execution, Pipeline

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("ops"))
    return client


def test_pause_resume_and_replay_in_the_admin_are_audited_as_the_user(
    ops: Client, org: Organization
) -> None:
    event = eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    Delivery.objects.filter(event_id=event.pk).update(status="done", finished_at=timezone.now())
    consumer = "/admin/ops/consumers/effect-a-worker"
    ops.post(f"{consumer}/pause/", {"reason": "the CRM API is down"})
    ops.post(f"{consumer}/resume/", {"reason": "back"})
    ops.post(
        f"{consumer}/replay/",
        {"since": "2020-01-01T00:00", "reason": "a bug for two hours", "replay": "1"},
    )
    actors = dict(AuditLog.objects.values_list("action", "actor"))
    assert actors == {
        "consumer.pause": "user:ops",
        "consumer.resume": "user:ops",
        "consumer.replay": "user:ops",
    }


def test_the_index_names_the_models_properly(ops: Client) -> None:
    html = ops.get("/admin/").content.decode()
    for proper in (">AI accounts<", ">WAHA sessions<", ">Integration health<"):
        assert proper in html
    for improper in ("Ai accounts", "Waha sessions", "Integration healths"):
        assert improper not in html


def test_a_read_only_page_says_view_and_has_no_history_button(
    ops: Client, org: Organization
) -> None:
    pipeline = Pipeline.objects.create(organization=org, name="Orders", trigger="order.paid")
    execution = Execution.objects.create(
        organization=org, pipeline=pipeline, trigger="order.paid", started_at=timezone.now()
    )
    html = ops.get(f"/admin/pipelines/execution/{execution.pk}/change/").content.decode()
    assert "<h1>View execution</h1>" in html and "Change execution" not in html
    assert "historylink" not in html
    entry = AuditLog.objects.create(actor="user:x", action="a", target_type="t", target_id="1")
    assert "historylink" not in ops.get(f"/admin/core/auditlog/{entry.pk}/change/").content.decode()
    editable = ops.get(f"/admin/pipelines/pipeline/{pipeline.pk}/change/").content.decode()
    assert "historylink" in editable  # a page that changes things keeps its history


def test_ai_usage_shows_the_open_day_beside_the_finished_ones(
    ops: Client, org: Organization, org_b: Organization
) -> None:
    today = local_today()
    AiAccount.objects.create(
        organization=org,
        daily_budget_cents=500,
        spent_day=today,
        spent_cents=Decimal("123.4500"),
        calls=7,
    )
    AiAccount.objects.create(organization=org_b, daily_budget_cents=500, spent_day=today)
    AiUsageDaily.objects.create(
        organization=org,
        day=today - dt.timedelta(days=1),
        spent_cents=Decimal("99"),
        budget_cents=500,
        calls=3,
        tokens_in=10,
        tokens_out=10,
    )
    html = ops.get("/admin/ai/aiusagedaily/").content.decode()
    open_days = html.split('id="open-days"', 1)[1].split("</table>", 1)[0]
    assert today.isoformat() in open_days and "123.4500" in open_days
    assert org.name in open_days and org_b.name not in open_days  # no spend, no row
    assert "1 AI usage day" in html  # the finished day, in the list below
