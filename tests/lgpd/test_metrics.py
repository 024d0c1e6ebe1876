"""The LGPD SLA gauge an alert rule watches (deploy/prometheus: LgpdSlaBreached)."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine

from lgpd.metrics import OverdueRequestsCollector
from tests.lgpd.conftest import World, request_for

pytestmark = pytest.mark.django_db


def overdue() -> dict[str, float]:
    (family,) = OverdueRequestsCollector().collect()
    return {s.labels["level"]: s.value for s in family.samples}


def test_open_requests_past_the_sla_are_counted_per_level(
    world: World, clock: time_machine.Coordinates
) -> None:
    request_for(world, "redact")
    assert overdue() == {"warn": 0, "escalate": 0}
    clock.shift(dt.timedelta(days=5, hours=1))
    assert overdue() == {"warn": 1, "escalate": 0}
    clock.shift(dt.timedelta(days=1))
    assert overdue() == {"warn": 1, "escalate": 1}
