"""GCRA in PostgreSQL (core.rate_limits): rates, free refusals, exact across processes."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from core import rate_limits
from tests.support.hammer import hammer

T0 = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("text", "count", "seconds"),
    [("600/minute", 600, 60), ("5/second", 5, 1), ("1 / hours", 1, 3600), ("10/day", 10, 86400)],
)
def test_parse_rate(text: str, count: int, seconds: int) -> None:
    rate = rate_limits.parse_rate(text)
    assert (rate.count, rate.period.total_seconds()) == (count, seconds)


@pytest.mark.parametrize("text", ["", "600", "0/minute", "-1/minute", "5/fortnight", "x/minute"])
def test_parse_rate_rejects_nonsense(text: str) -> None:
    with pytest.raises(ValueError, match="must look like"):
        rate_limits.parse_rate(text)


@pytest.mark.django_db
def test_refused_requests_do_not_consume_allowance() -> None:
    rate = rate_limits.parse_rate("2/minute")
    key = f"test:{uuid.uuid4()}"
    assert rate_limits.hit(key, rate, T0) is None
    assert rate_limits.hit(key, rate, T0) is None
    for _ in range(5):
        assert rate_limits.hit(key, rate, T0) == 30.0
    assert rate_limits.hit(key, rate, T0 + dt.timedelta(seconds=30)) is None


@pytest.mark.django_db(transaction=True)
def test_the_limit_is_exact_across_processes() -> None:
    """Two processes, 40 requests each, one key limited to 50: exactly 50 get through."""
    allowed = hammer(
        "from core import rate_limits\n"
        "def allowed(key, rate, now):\n"
        "    return rate_limits.hit(key, rate, now) is None\n",
        f"test:{uuid.uuid4()}",
    )
    assert sum(allowed) == 50
