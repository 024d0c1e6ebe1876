"""Each store's sync lag on /metrics, per organization within the per-tenant cardinality guard."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from nuvemshop.metrics import SyncLagCollector
from nuvemshop.models import Store
from tests.support.factories import OrganizationFactory

pytestmark = pytest.mark.django_db


def lags() -> dict[str, float]:
    (family,) = SyncLagCollector().collect()
    return {s.labels["organization"]: round(s.value) for s in family.samples}


def store(slug: str, ns_id: int, synced_minutes_ago: int, **fields: Any) -> Store:
    now = timezone.now()
    record = Store(
        organization=OrganizationFactory(slug=slug),
        ns_store_id=ns_id,
        last_sync_at=now - dt.timedelta(minutes=synced_minutes_ago),
        **fields,
    )
    record.access_token = "token-for-tests"
    record.save()
    return record


def test_the_most_lagging_stores_keep_their_own_series_and_the_rest_is_the_worst_of_them(
    settings: Any,
) -> None:
    settings.EVENTBUS = {**settings.EVENTBUS, "METRICS_TOP_ORGANIZATIONS": 2}
    store("loja-a", 1, 60)
    store("loja-b", 2, 30)
    store("loja-c", 3, 10)
    store("loja-d", 4, 5)
    store("loja-gone", 5, 600, status=Store.Status.UNINSTALLED)  # not syncing: no lag
    assert lags() == {"loja-a": 3600, "loja-b": 1800, "other": 600}
