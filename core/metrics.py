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

from django.conf import settings
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
)


def multiprocess_mode() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


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


def start_exporter_if_configured() -> int | None:
    """Serve this process's metrics on METRICS_PORT (worker processes); returns the port."""
    port = int(os.environ.get("METRICS_PORT") or 0)
    if not port:
        return None
    start_http_server(port, addr=os.environ.get("METRICS_ADDR", "0.0.0.0"))  # noqa: S104
    return port
