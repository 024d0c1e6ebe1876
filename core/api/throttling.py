"""DRF throttle: `API_THROTTLE_RATE` per API key, GCRA in PostgreSQL (core.rate_limits).

A request is counted by the statement that authenticates its key (core.api.authentication), so
throttling costs no round trip of its own; only a refusal reads the state once more, for its
`Retry-After`.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from django.utils import timezone
from rest_framework.throttling import BaseThrottle

from core import rate_limits, selectors
from core.api.conf import api_settings


def api_rate() -> rate_limits.Rate:
    return _parsed(api_settings.THROTTLE_RATE)


@functools.cache
def _parsed(text: str) -> rate_limits.Rate:  # by its text: tests override the setting
    return rate_limits.parse_rate(text)


def throttles(view: Any) -> bool:
    """Does `view` limit requests per API key (so its authentication should count them)?"""
    return any(issubclass(c, ApiKeyRateThrottle) for c in getattr(view, "throttle_classes", ()))


class ApiKeyRateThrottle(BaseThrottle):
    """429 with `Retry-After` beyond `API_THROTTLE_RATE` requests per API key."""

    def __init__(self) -> None:
        self._wait: float | None = None

    def allow_request(self, request: Any, view: Any) -> bool:
        client = request.user
        if not getattr(client, "is_authenticated", False):
            return True  # nothing to count: such requests already failed authentication
        if client.allowed:  # counted, and within the rate, when the key was authenticated
            return True
        key = f"{selectors.THROTTLE_KEY_PREFIX}{client.key_id}"
        rate, now = api_rate(), timezone.now()
        if client.allowed is None:  # not counted when authenticated
            self._wait = rate_limits.hit(key, rate, now)
        else:
            self._wait = rate_limits.wait_after_refusal(key, rate, now)
        return self._wait is None

    def wait(self) -> float | None:
        # Retry-After is whole seconds; round up so a client that obeys it is let through.
        return None if self._wait is None else max(1, math.ceil(self._wait))
