"""The conversations and analytics API: tenant from the key, scopes, 400/404/409 in the API's
error shape."""

from __future__ import annotations

import datetime as dt

import pytest

from core.models import Organization
from crm.conversation_models import AnalyticsDaily
from eventbus.store.models import EventLog
from tests.crm.support import agent
from tests.support.api import api_client
from tests.support.factories import ConversationFactory

pytestmark = pytest.mark.django_db


def test_list_assign_resolve_reopen(org: Organization, org_b: Organization) -> None:
    mine = ConversationFactory(organization=org)
    ConversationFactory(organization=org_b)
    ana = agent(org, "ana")
    client = api_client(org, "conversations:write")
    listed = client.get("/api/v1/conversations")
    assert [c["id"] for c in listed.json()["results"]] == [str(mine.pk)]
    base = f"/api/v1/conversations/{mine.pk}"
    assigned = client.post(f"{base}/assign", {"user_id": ana.pk}, format="json")
    assert assigned.status_code == 200 and assigned.json()["assigned_to_id"] == ana.pk
    resolved = client.post(f"{base}/resolve", {"note": "ok"}, format="json")
    assert resolved.json()["status"] == "resolved"
    again = client.post(f"{base}/resolve", {}, format="json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "invalid_state"
    assert client.post(f"{base}/reopen", {}, format="json").json()["status"] == "open"
    types = set(EventLog.objects.values_list("event_type", flat=True))
    assert {"conversation.assigned", "conversation.resolved", "conversation.reopened"} <= types


def test_other_tenants_and_bad_input(org: Organization, org_b: Organization) -> None:
    theirs = ConversationFactory(organization=org_b)
    mine = ConversationFactory(organization=org)
    client = api_client(org, "conversations:write")
    assert client.get(f"/api/v1/conversations/{theirs.pk}").status_code == 404
    assert (
        client.post(f"/api/v1/conversations/{theirs.pk}/resolve", {}, format="json").status_code
        == 404
    )
    stranger = agent(org_b, "bruno")
    refused = client.post(
        f"/api/v1/conversations/{mine.pk}/assign", {"user_id": stranger.pk}, format="json"
    )
    assert refused.status_code == 400 and "user_id" in refused.json()["error"]["fields"]
    unknown = client.post(
        f"/api/v1/conversations/{mine.pk}/assign", {"user_id": 1, "org": "x"}, format="json"
    )
    assert unknown.status_code == 400
    assert (
        api_client(org, "conversations:read")
        .post(f"/api/v1/conversations/{mine.pk}/resolve", {}, format="json")
        .status_code
        == 403
    )


def test_analytics_daily_is_tenant_isolated_and_validated(
    org: Organization, org_b: Organization
) -> None:
    day = dt.date(2026, 12, 5)
    AnalyticsDaily.objects.create(organization=org, day=day, metric="message.received", count=3)
    AnalyticsDaily.objects.create(organization=org_b, day=day, metric="message.received", count=9)
    client = api_client(org, "analytics:read")
    ok = client.get("/api/v1/analytics/daily", {"since": "2026-12-01", "until": "2026-12-06"})
    assert ok.json() == {
        "results": [{"day": "2026-12-05", "metric": "message.received", "count": 3}]
    }
    for bad in (
        {"since": "2026-12-06", "until": "2026-12-01"},
        {"since": "2025-01-01", "until": "2026-12-06"},
        {"since": "yesterday", "until": "2026-12-06"},
        {"until": "2026-12-06"},
        {"since": "2026-12-01", "until": "2026-12-06", "metric": "lead.created"},
    ):
        answer = client.get("/api/v1/analytics/daily", bad)
        assert answer.status_code == 400, bad
        assert answer.json()["error"]["code"] == "validation_error"
    assert (
        api_client(org, "conversations:read")
        .get("/api/v1/analytics/daily", {"since": "2026-12-01", "until": "2026-12-06"})
        .status_code
        == 403
    )
