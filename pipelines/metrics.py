"""The pipelines app's Prometheus metrics (declared here only)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

EXECUTIONS = Counter(
    "deskcomm_pipelines_executions_total",
    "Pipeline runs by trigger kind (order.pre, order.post, event) and final status.",
    ["trigger", "status"],
)
STEP_SECONDS = Histogram(
    "deskcomm_pipelines_step_duration_seconds",
    "How long one pipeline step ran, by node type and status.",
    ["node_type", "status"],
    buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)

LOOPS_REFUSED = Counter(
    "deskcomm_pipelines_loops_refused_total",
    "event.<type> pipeline runs not started because the event came from the pipeline's own "
    "causation chain.",
)


def trigger_kind(trigger: str) -> str:
    """`event.<type>` triggers count together: their types are unbounded label values."""
    return "event" if trigger.startswith("event.") else trigger
