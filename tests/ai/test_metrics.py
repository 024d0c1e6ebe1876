"""Each organization's AI spend this month on /metrics (seed 001 A16/A17), within the per-tenant
cardinality guard."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
import time_machine

from ai.budget import local_today
from ai.metrics import MonthCostCollector
from ai.models import AiAccount, AiUsageDaily
from core.models import Organization
from tests.support.factories import OrganizationFactory

pytestmark = pytest.mark.django_db


def spend() -> dict[str, float]:
    (family,) = MonthCostCollector().collect()
    return {s.labels["organization"]: s.value for s in family.samples}


def usage(org: Organization, day: dt.date, cents: str) -> None:
    AiUsageDaily.objects.create(
        organization=org, day=day, spent_cents=Decimal(cents), budget_cents=1000,
        calls=1, tokens_in=1, tokens_out=1,
    )  # fmt: skip


@time_machine.travel(dt.datetime(2026, 11, 15, 12, tzinfo=dt.UTC), tick=False)
def test_the_month_so_far_is_the_snapshotted_days_plus_today() -> None:
    acme = OrganizationFactory(slug="acme")
    AiAccount.objects.create(
        organization=acme,
        daily_budget_cents=1000,
        spent_day=dt.date(2026, 11, 15),
        spent_cents=Decimal("12.5"),
    )
    usage(acme, dt.date(2026, 11, 1), "100")
    usage(acme, dt.date(2026, 11, 14), "0.5")
    usage(acme, dt.date(2026, 10, 31), "999")  # last month: not counted
    stale = OrganizationFactory(slug="stale")  # no call since last month: nothing this month
    AiAccount.objects.create(
        organization=stale, daily_budget_cents=1000, spent_day=dt.date(2026, 10, 30), spent_cents=9
    )
    assert spend() == {"acme": 113.0}


def test_only_the_top_spenders_keep_their_own_series(settings: Any) -> None:
    settings.EVENTBUS = {**settings.EVENTBUS, "METRICS_TOP_ORGANIZATIONS": 1}
    today = local_today()
    for slug, cents in (("big", "500"), ("small", "3"), ("tiny", "2")):
        AiAccount.objects.create(
            organization=OrganizationFactory(slug=slug),
            daily_budget_cents=1000,
            spent_day=today,
            spent_cents=Decimal(cents),
        )
    assert spend() == {"big": 500.0, "other": 5.0}
