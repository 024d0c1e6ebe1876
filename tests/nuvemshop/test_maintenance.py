"""The periodic jobs against the fake: oauth-refresh-tokens (check + re-encrypt, revoked ->
token_invalid + alert), health-check-integrations (integration_health, alert after 2
failures, the health endpoint shows the last result), poll-abandoned-carts (one event per cart)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import time_machine
from cryptography.fernet import Fernet
from django.test import Client

from crm.models import Contact
from eventbus.store.models import EventLog
from jobs.registry import jobs
from nuvemshop import maintenance
from nuvemshop.models import OAUTH_CONTEXT, IntegrationHealth, Store
from tests.support.nuvemshop import FakeNuvemshop, FakeStore, checkout

pytestmark = pytest.mark.django_db


def test_the_jobs_are_registered_with_their_schedules() -> None:
    assert jobs.get("oauth-refresh-tokens").every.total_seconds() == 3600
    assert jobs.get("health-check-integrations").every.total_seconds() == 900
    assert jobs.get("poll-abandoned-carts") is not None


def test_refresh_re_encrypts_a_working_token_under_the_current_key(
    settings: Any, store: Store, shop: FakeStore
) -> None:
    old = Fernet.generate_key().decode()
    new = Fernet.generate_key().decode()
    settings.ENCRYPTION_KEYS = {**settings.ENCRYPTION_KEYS, OAUTH_CONTEXT: [old]}
    store.access_token = shop.token
    store.save()
    settings.ENCRYPTION_KEYS = {**settings.ENCRYPTION_KEYS, OAUTH_CONTEXT: [new, old]}
    assert maintenance.tokens_refresh() == 1
    store.refresh_from_db()
    settings.ENCRYPTION_KEYS = {**settings.ENCRYPTION_KEYS, OAUTH_CONTEXT: [new]}
    assert store.access_token == shop.token  # readable with the new key alone
    assert store.token_checked_at is not None


def test_refresh_marks_a_revoked_token_and_alerts(
    store: Store, shop: FakeStore, caplog: pytest.LogCaptureFixture
) -> None:
    shop.token = "another-install"
    assert maintenance.tokens_refresh() == 0
    store.refresh_from_db()
    assert store.status == "token_invalid"
    assert "ALERT: Nuvemshop token invalid" in caplog.text


@pytest.mark.django_db(transaction=True)  # the health check reads on a thread of its own
@pytest.mark.usefixtures("unhurried")
def test_health_records_each_ping_and_alerts_after_two_failures(
    client: Client, store: Store, fake: FakeNuvemshop, caplog: pytest.LogCaptureFixture
) -> None:
    maintenance.stores_ping()
    assert IntegrationHealth.objects.get().ok
    fake.fail(30, status=503)
    maintenance.stores_ping()
    assert "Nuvemshop store unhealthy" not in caplog.text
    maintenance.stores_ping()
    last = IntegrationHealth.objects.order_by("-checked_at").first()
    assert last is not None and (last.ok, last.consecutive_failures) == (False, 2)
    assert caplog.text.count("ALERT: Nuvemshop store unhealthy") == 1
    health = client.get("/api/v1/health").json()
    assert health["checks"]["nuvemshop"] | {"duration_ms": 0} == {
        "status": "fail",
        "required": False,
        "error": "StoreUnhealthy",
        "duration_ms": 0,
    }


def test_abandoned_carts_are_emitted_once_each(store: Store, shop: FakeStore) -> None:
    contact = Contact.objects.create(organization=store.organization, email="ana@example.com")
    shop.checkouts.extend(
        [
            checkout(1, email="ana@example.com"),  # created 2026-12-01 09:00 -03:00
            checkout(2, email="x@example.com", total="9.99"),
            # 23 h before the poll, inside CART_LOOKBACK_HOURS (24)...
            {**checkout(3, email="y@example.com"), "created_at": "2026-11-30T10:00:00-03:00"},
            # ...and 24 h 1 min before it, outside.
            {**checkout(4, email="z@example.com"), "created_at": "2026-11-30T08:59:00-03:00"},
        ]
    )
    with time_machine.travel(dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)):
        assert maintenance.carts_poll() == 3
        maintenance.carts_poll()
    events = EventLog.objects.filter(event_type="nuvemshop.cart_abandoned").order_by(
        "payload__cart_id"
    )
    assert [e.payload["cart_id"] for e in events] == ["1", "2", "3"]
    assert events[0].payload["contact_id"] == str(contact.pk)
    assert events[1].payload["value_cents"] == 999
    assert "ana@example.com" not in str([e.payload for e in events])
