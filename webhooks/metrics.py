"""The webhooks app's Prometheus metrics (declared here only)."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable

from prometheus_client import Counter

ATTEMPTS = Counter(
    "deskcomm_webhooks_attempts_total",
    "Webhook HTTP attempts by status class (2xx, 3xx, 4xx, 5xx, or error: no answer).",
    ["status_class"],
)


def status_class(status_code: int | None) -> str:
    """ "2xx".."5xx" for an HTTP answer, "error" when none came (timeout, refused, SSRF block)."""
    return f"{status_code // 100}xx" if status_code else "error"


def count_attempts(status_codes: Iterable[int | None]) -> None:
    """One increment per status class of a settled batch."""
    for label, n in Tally(status_class(code) for code in status_codes).items():
        ATTEMPTS.labels(label).inc(n)
