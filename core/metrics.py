"""`/metrics` (Prometheus text format), HTTP request metrics, and the workers' own exporter.

Multi-process layout (docs/operations.md):
- web: gunicorn runs several worker processes, so it uses prometheus-client's multiprocess mode:
  `PROMETHEUS_MULTIPROC_DIR` names a directory (emptied when gunicorn starts, dead workers marked
  by `gunicorn.conf.py`), every process writes its samples there, and `/metrics` on any worker
  sums them. The scrape-time queue gauges are read from the database by whichever process
  answers, so they are never summed.
- drain_events / deliver_webhooks (one process each, threads inside): with `METRICS_PORT` set
  they serve their own counters on that port (per-process exporter, internal network only).
  Prometheus scrapes each; the queue gauges come only from web's `/metrics`.

Scrape-time gauges (read from the database when Prometheus scrapes, never summed) come from the
collectors apps register with `register_scrape_collector` in `ready()`: the bus's queue shape,
the job queue and last job runs (here), open LGPD requests past their SLA.
"""

from __future__ import annotations

import hmac
import os
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db.backends.base.base import BaseDatabaseWrapper
from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
    start_http_server,
)
from prometheus_client.registry import Collector

from core import rls

HTTP_REQUESTS = Counter(
    "deskcomm_http_requests_total",
    "HTTP requests answered, by method, route pattern and status code.",
    ["method", "route", "status"],
)
# Requests of the views marked replica-readable (core.replica.routing), by who served their reads:
# `replica`; `pinned` (the primary, just after this browser's write); `fallback` (the primary,
# the replica lagging, unreachable or not a standby).
REPLICA_REQUESTS = Counter(
    "deskcomm_db_replica_requests_total",
    "Replica-readable requests, by who served their reads (replica, pinned, fallback).",
    ["served_by"],
)
HTTP_DURATION = Histogram(
    "deskcomm_http_request_duration_seconds",
    "Time to answer an HTTP request, by method and route pattern.",
    ["method", "route"],
    # 0.3 / 0.5 / 1 / 2: the seed's API targets (p95 < 300 ms, warn 500 ms; p99 1 s / 2 s).
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.3, 0.5, 1, 2, 2.5, 5, 10),
)
# Every SQL statement Django runs, timed around the driver's execute (seed 001 A11 and the DB SLO:
# p95 < 100 ms, critical > 300 ms). One label, the connection alias (default, replica): bounded.
# pg_stat_statements keeps means per statement, not percentiles, and needs a preloaded library;
# this histogram gives the p95 over all queries in every deployment.
DB_QUERY_DURATION = Histogram(
    "deskcomm_db_query_duration_seconds",
    "Time of each SQL statement Django sends, by database alias.",
    ["alias"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.3, 0.5, 1, 2.5, 5, 10),
)


def multiprocess_mode() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


OTHER_ORGANIZATIONS = "other"
_scrape_collectors: list[Callable[[], Collector]] = []


def register_scrape_collector(factory: Callable[[], Collector]) -> None:
    """Add a collector read at scrape time (an app's `ready()`; once per factory)."""
    if factory not in _scrape_collectors:
        _scrape_collectors.append(factory)


def exposition() -> bytes:
    """This deployment's metrics: counters (all processes in multiprocess mode) + scrape gauges."""
    if multiprocess_mode():
        counters = CollectorRegistry()
        multiprocess.MultiProcessCollector(counters)
    else:
        counters = REGISTRY
    scraped = CollectorRegistry(auto_describe=False)
    for factory in _scrape_collectors:
        scraped.register(factory())
    return generate_latest(counters) + generate_latest(scraped)


# Messages waiting in the Postgres job broker's queues (dramatiq-postgres' own table).

# Each registered job's newest finished run and newest success (jobrun_job_started_idx).


def metrics_view(request: HttpRequest) -> HttpResponse:
    """GET /metrics with `Authorization: Bearer <METRICS_TOKEN>`; 403 when no token is set."""
    if not _authorized(request):
        return HttpResponse("forbidden\n", status=403, content_type="text/plain")
    rls.set_scope(bypass=True)  # the queue gauges count every tenant's deliveries
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)


def _authorized(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    if not token:
        return bool(settings.DEBUG)  # fail closed in production
    offered = request.headers.get("Authorization", "")
    return hmac.compare_digest(offered.encode(), f"Bearer {token}".encode())


class HttpMetricsMiddleware:
    """Counts and times every request by route pattern (never the raw path: bounded labels)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        route = match.route if match is not None and match.route else "unmatched"
        HTTP_REQUESTS.labels(request.method, route, str(response.status_code)).inc()
        HTTP_DURATION.labels(request.method, route).observe(time.perf_counter() - started)
        return response


def top_organizations(
    values: dict[str, float], top: int, combine: Callable[[list[float]], float]
) -> dict[str, float]:
    """The cardinality guard of the per-tenant gauges: the `top` organizations with the highest
    values keep their own series (by slug), the others are combined (`sum` or `max`) as `other`."""
    ranked = sorted(values.items(), key=lambda item: (-item[1], item[0]))
    kept = dict(ranked[:top])
    rest = [value for _, value in ranked[top:]]
    if rest:
        kept[OTHER_ORGANIZATIONS] = combine(rest)
    return kept


def time_queries(
    execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    """An execute wrapper: observes the statement's duration, failed ones included."""
    started = time.perf_counter()
    try:
        return execute(sql, params, many, context)
    finally:
        alias = context["connection"].alias
        DB_QUERY_DURATION.labels(alias).observe(time.perf_counter() - started)


def install_query_timer(*, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    """connection_created: time every statement of this connection (`time_queries`)."""
    if time_queries not in connection.execute_wrappers:
        connection.execute_wrappers.append(time_queries)


def start_exporter_if_configured() -> int | None:
    """Serve this process's metrics on METRICS_PORT (worker processes); returns the port."""
    port = int(os.environ.get("METRICS_PORT") or 0)
    if not port:
        return None
    start_http_server(port, addr=os.environ.get("METRICS_ADDR", "0.0.0.0"))  # noqa: S104
    return port
