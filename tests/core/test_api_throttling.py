"""Per-key rate limits (GCRA in PostgreSQL): 429 + Retry-After, recovery, exact across processes."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import textwrap
import uuid

import pytest
import time_machine
from django.test.utils import override_settings

from core.api import throttling
from core.models import Organization
from tests.support.api import api_client, error_of
from tests.support.processes import REPO, subprocess_env

EVENTS = "/api/v1/events"
T0 = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("text", "count", "seconds"),
    [("600/minute", 600, 60), ("5/second", 5, 1), ("1 / hours", 1, 3600), ("10/day", 10, 86400)],
)
def test_parse_rate(text: str, count: int, seconds: int) -> None:
    rate = throttling.parse_rate(text)
    assert (rate.count, rate.period.total_seconds()) == (count, seconds)


@pytest.mark.parametrize("text", ["", "600", "0/minute", "-1/minute", "5/fortnight", "x/minute"])
def test_parse_rate_rejects_nonsense(text: str) -> None:
    with pytest.raises(ValueError, match="must look like"):
        throttling.parse_rate(text)


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
def test_refused_requests_do_not_consume_allowance() -> None:
    rate = throttling.parse_rate("2/minute")
    key = f"test:{uuid.uuid4()}"
    assert throttling.hit(key, rate, T0) is None
    assert throttling.hit(key, rate, T0) is None
    for _ in range(5):
        assert throttling.hit(key, rate, T0) == 30.0
    assert throttling.hit(key, rate, T0 + dt.timedelta(seconds=30)) is None


HAMMER = textwrap.dedent(
    """
    import sys, django
    django.setup()
    from django.utils import timezone
    from core.api import throttling
    key, hits = sys.argv[1], int(sys.argv[2])
    rate = throttling.parse_rate("50/hour")
    print("ready", flush=True)
    sys.stdin.readline()
    allowed = sum(throttling.hit(key, rate, timezone.now()) is None for _ in range(hits))
    print(allowed, flush=True)
    """
)


@pytest.mark.django_db(transaction=True)
def test_the_limit_is_exact_across_processes() -> None:
    """Two processes, 40 requests each, one key limited to 50: exactly 50 get through."""
    key = f"test:{uuid.uuid4()}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", HAMMER, key, "40"],
            env=subprocess_env(),
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        allowed = [int(proc.communicate(timeout=60)[0].strip()) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert sum(allowed) == 50
