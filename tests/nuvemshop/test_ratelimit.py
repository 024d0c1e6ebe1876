"""The shared limiter's bucket on database time: tokens are spent and refilled at the budget's
rate, and a block (429 Retry-After) holds every caller of the store until it ends."""

from __future__ import annotations

import time
from typing import Any

import pytest

from nuvemshop import ratelimit

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _five_per_second(settings: Any) -> None:
    # burst 1, refill (5 - 2) / 1 s = 3 tokens/s
    settings.NUVEMSHOP = {"RATE_LIMIT_REQUESTS": 5, "RATE_LIMIT_WINDOW_SECONDS": 1.0}


def test_callers_past_the_burst_wait_for_the_refill() -> None:
    started = time.monotonic()
    for _ in range(4):
        ratelimit.acquire(1)
    assert time.monotonic() - started >= 0.9  # 1 token at once, then 3 at 3 per second


def test_buckets_are_per_store() -> None:
    started = time.monotonic()
    for store in range(10, 14):
        ratelimit.acquire(store)
    assert time.monotonic() - started < 0.9


def test_a_block_holds_the_store_until_it_ends() -> None:
    ratelimit.block(2, 0.5)  # a new bucket: full, so only the block can hold the call
    started = time.monotonic()
    ratelimit.acquire(2)
    assert time.monotonic() - started >= 0.45


def test_no_token_within_the_wait_limit_is_an_error(settings: Any) -> None:
    settings.NUVEMSHOP = {**settings.NUVEMSHOP, "MAX_RATE_WAIT_SECONDS": 0.1}
    ratelimit.block(3, 30)
    with pytest.raises(ratelimit.RateLimitTimeout):
        ratelimit.acquire(3)
