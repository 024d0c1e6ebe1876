"""The AI app's Prometheus metrics (declared here only): model calls, tokens, cost, errors,
replies, handoffs and throttled messages; each organization's spend this month (scrape time)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

CALL_SECONDS = Histogram(
    "deskcomm_ai_call_duration_seconds",
    "Model call latency, by kind (chat, embedding) and model.",
    ["kind", "model"],
    buckets=(0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60),
)
TOKENS = Counter(
    "deskcomm_ai_tokens_total",
    "Tokens used by model calls, by kind, model and direction (in, out).",
    ["kind", "model", "direction"],
)
COST = Counter(
    "deskcomm_ai_cost_cents_total",
    "Cost of model calls in cents, by kind and model.",
    ["kind", "model"],
)
ERRORS = Counter(
    "deskcomm_ai_errors_total",
    "Failed model calls, by kind, model and error class (rate_limited, server_error, timeout...).",
    ["kind", "model", "error_class"],
)
FALLBACKS = Counter(
    "deskcomm_ai_fallbacks_total",
    "Chat calls the fallback model answered or failed, by the primary's error class and outcome.",
    ["error_class", "outcome"],
)
# Prompt caching: input tokens the provider reported as served from its cache (tokens saved).
CACHED_TOKENS = Counter(
    "deskcomm_ai_cached_tokens_total",
    "Input tokens the provider served from its prompt cache, by kind and model.",
    ["kind", "model"],
)
OUTCOMES = Counter(
    "deskcomm_ai_responder_outcomes_total",
    "What the responder did with an inbound message (replied, skipped, throttled, handoff...).",
    ["outcome"],
)


def observe_call(
    kind: str, model: str, *, latency_ms: int, tokens_in: int, tokens_out: int, cost: float
) -> None:
    CALL_SECONDS.labels(kind, model).observe(latency_ms / 1000)
    TOKENS.labels(kind, model, "in").inc(tokens_in)
    TOKENS.labels(kind, model, "out").inc(tokens_out)
    COST.labels(kind, model).inc(cost)


def count_error(kind: str, model: str, error_class: str) -> None:
    ERRORS.labels(kind, model, error_class).inc()


def count_outcome(outcome: str) -> None:
    OUTCOMES.labels(outcome).inc()


class MonthCostCollector(Collector):
    """Each organization's AI spend this month in cents (seed 001 A16/A17: $300 / $500 a
    month), within the per-tenant cardinality guard (the rest summed as `other`)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from ai.budget import month_spend_cents
        from core.metrics import top_organizations
        from eventbus.store.conf import bus_settings

        family = GaugeMetricFamily(
            "deskcomm_ai_cost_month_cents",
            "AI spend this month (budget time zone) in cents, by organization (slug; other).",
            labels=["organization"],
        )
        spend = month_spend_cents()
        for slug, cents in top_organizations(
            spend, bus_settings.METRICS_TOP_ORGANIZATIONS, sum
        ).items():
            family.add_metric([slug], cents)
        yield family


class ProviderCollector(Collector):
    """The model provider's last ping by health-check-integrations (ai.health): 1 answered,
    0 failing; nothing before the first ping."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from ai.models import ProviderHealth

        up = GaugeMetricFamily(
            "deskcomm_ai_provider_up",
            "Whether the model provider answered the last health ping (embedding): 1 or 0.",
        )
        failures = GaugeMetricFamily(
            "deskcomm_ai_provider_consecutive_failures",
            "Failed model provider health pings in a row.",
        )
        last = ProviderHealth.objects.order_by("-checked_at").first()
        if last is not None:
            up.add_metric([], 1.0 if last.ok else 0.0)
            failures.add_metric([], float(last.consecutive_failures))
        yield up
        yield failures
