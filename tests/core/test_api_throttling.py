"""Per-key API rate limits: 429 + Retry-After, recovery, counted by the key's own query."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.test.utils import override_settings

from core import api_keys, services
from core.models import ApiKey, Organization, ThrottleState
from tests.support.api import api_client, client_for, error_of, issue_key, lead_stage_changed
from tests.support.hammer import hammer

EVENTS = "/api/v1/events"
T0 = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC)


@pytest.mark.django_db
@override_settings(API={"THROTTLE_RATE": "3/minute"})
def test_burst_then_429_with_retry_after_then_recovery(
    org: Organization, org_b: Organization
) -> None:
    client = api_client(org, "events:read")
    with time_machine.travel(T0, tick=False) as clock:
        assert [client.get(EVENTS).status_code for _ in range(3)] == [200, 200, 200]
        refused = client.get(EVENTS)
        error_of(refused, 429, "throttled")
        # 3/minute = one request per 20 s once the burst is spent.
        assert refused["Retry-After"] == "20"
        clock.shift(dt.timedelta(seconds=19))
        error_of(client.get(EVENTS), 429, "throttled")
        clock.shift(dt.timedelta(seconds=1))
        assert client.get(EVENTS).status_code == 200
        error_of(client.get(EVENTS), 429, "throttled")
        # Another key (even of another organization) has its own allowance.
        assert api_client(org_b, "events:read").get(EVENTS).status_code == 200


@pytest.mark.django_db
@override_settings(API={"THROTTLE_RATE": "2/minute"})
def test_only_a_verified_live_key_spends_its_allowance(org: Organization) -> None:
    """The count is in the key's own query, yet a wrong secret or a revoked key counts nothing."""
    _, full = services.api_key_create(
        organization=org, name="ERP", scopes_granted=["events:read"], actor="t"
    )
    wrong = full[:-1] + ("A" if full[-1] != "A" else "B")  # the right prefix, another secret
    with time_machine.travel(T0, tick=False):
        for _ in range(5):
            error_of(client_for(wrong).get(EVENTS), 401, "authentication_failed")
        assert not ThrottleState.objects.exists()
        assert [client_for(full).get(EVENTS).status_code for _ in range(3)] == [200, 200, 429]
        revoked, token = services.api_key_create(
            organization=org, name="old", scopes_granted=["events:read"], actor="t"
        )
        services.api_key_revoke(api_key=revoked, actor="t")
        for _ in range(3):
            error_of(client_for(token).get(EVENTS), 401, "authentication_failed")
    assert list(ThrottleState.objects.values_list("key", flat=True)) == [f"api_key:{_key_id(full)}"]


@pytest.mark.django_db
@override_settings(API={"THROTTLE_RATE": "2/minute"})
def test_a_request_refused_for_its_scopes_still_counts(org: Organization) -> None:
    client = api_client(org, "events:read")
    with time_machine.travel(T0, tick=False):
        error_of(client.post(EVENTS, lead_stage_changed(), format="json"), 403, "permission_denied")
        assert client.get(EVENTS).status_code == 200
        # The allowance is spent: a refusal for scopes still answers 403 first, then the rest 429.
        error_of(client.post(EVENTS, lead_stage_changed(), format="json"), 403, "permission_denied")
        error_of(client.get(EVENTS), 429, "throttled")


@pytest.mark.django_db(transaction=True)
def test_the_api_limit_is_exact_across_processes(org: Organization) -> None:
    """The authenticating statement counts as exactly as the upsert alone (50 of 2 x 40)."""
    token = issue_key(org, "events:read")
    allowed = hammer(
        "from core import selectors\n"
        "def allowed(token, rate, now):\n"
        "    key, within = selectors.api_key_and_hit(token, rate, now)\n"
        "    assert key is not None\n"
        "    return within\n",
        token,
    )
    assert sum(allowed) == 50


def _key_id(token: str) -> int:
    return ApiKey.objects.get(prefix=api_keys.prefix_of(token)).pk
