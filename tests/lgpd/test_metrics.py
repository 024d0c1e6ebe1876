"""The LGPD SLA gauges the alert rules watch (deploy/prometheus: LgpdSlaWarning, LgpdSlaEscalation,
LgpdSlaBreached): late against the request's own due date and the legal deadline, never by age."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import time_machine

from lgpd import services
from lgpd.metrics import OverdueRequestsCollector
from lgpd.models import DataRequest
from tests.lgpd.conftest import World, request_for
from tests.support.factories import ContactFactory, OrganizationFactory

pytestmark = pytest.mark.django_db


def gauges() -> tuple[dict[tuple[str, str], float], dict[str, float]]:
    late, lag, _ = OverdueRequestsCollector().collect()
    return (
        {(s.labels["kind"], s.labels["deadline"]): s.value for s in late.samples},
        {s.labels["kind"]: round(s.value, 2) for s in lag.samples},
    )


def late_of(kind: str) -> dict[str, float]:
    return {level: value for (k, level), value in gauges()[0].items() if k == kind}


def test_a_redaction_inside_its_d15_schedule_is_not_late(
    world: World, clock: time_machine.Coordinates
) -> None:
    request_for(world, "redact")
    clock.shift(dt.timedelta(days=14, hours=23))  # past the old D+5 / D+6 thresholds
    assert late_of("redact") == {"due": 0}
    assert gauges()[1]["redact"] == 0
    clock.shift(dt.timedelta(hours=3))  # D+15 02:00 and still open: two hours late
    assert late_of("redact") == {"due": 1}
    assert gauges()[1]["redact"] == 2.0


def test_an_access_request_is_late_after_its_export_date_then_near_and_past_the_legal_deadline(
    world: World, clock: time_machine.Coordinates
) -> None:
    request_for(world, "access")
    clock.shift(dt.timedelta(days=6, hours=23))
    assert late_of("access") == {"due": 0, "legal_margin": 0, "legal": 0}
    clock.shift(dt.timedelta(hours=2))  # D+7 01:00: the export should have run
    assert late_of("access") == {"due": 1, "legal_margin": 0, "legal": 0}
    assert gauges()[1]["access"] == 1.0
    clock.shift(dt.timedelta(days=6))  # D+13 01:00: two days to LGPD Art. 19's 15 days
    assert late_of("access") == {"due": 1, "legal_margin": 1, "legal": 0}
    clock.shift(dt.timedelta(days=2))
    assert late_of("access") == {"due": 1, "legal_margin": 1, "legal": 1}


def test_the_legal_deadline_and_its_margin_are_settings(
    world: World, clock: time_machine.Coordinates, settings: Any
) -> None:
    settings.LGPD = {**settings.LGPD, "LEGAL_DEADLINE_DAYS": 10, "LEGAL_MARGIN_DAYS": 1}
    request_for(world, "access")
    clock.shift(dt.timedelta(days=9, hours=1))
    assert late_of("access") == {"due": 1, "legal_margin": 1, "legal": 0}


def by_organization() -> dict[str, float]:
    *_, family = OverdueRequestsCollector().collect()
    return {s.labels["organization"]: round(s.value, 2) for s in family.samples}


def test_the_sla_lag_per_organization_is_capped_like_the_other_tenant_gauges(
    world: World, clock: time_machine.Coordinates, settings: Any
) -> None:
    settings.EVENTBUS = {**settings.EVENTBUS, "METRICS_TOP_ORGANIZATIONS": 1}
    late = request_for(world, "access")  # world.org: the most late
    others = [OrganizationFactory(slug=f"org-{i}") for i in range(2)]
    for org in others:
        services.data_request_create(
            organization_id=org.pk,
            contact_id=ContactFactory(organization=org).pk,
            kind="access",
            channel="command",
            actor="test",
        )
    DataRequest.objects.filter(pk=late.pk).update(
        received_at=late.received_at - dt.timedelta(hours=5)
    )
    clock.shift(dt.timedelta(days=7, hours=1))  # the two others: 1 h late; world's: 6 h
    assert by_organization() == {world.org.slug: 6.0, "other": 1.0}
    assert not any(o.slug in by_organization() for o in others)  # within the cap
