"""The event bus knobs, read from `settings.EVENTBUS` at call time (so tests can override them)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    "RETRY_SCHEDULE": [30, 60, 120, 300, 600, 1800, 3600, 7200],
    "RETRY_JITTER": 0.3,
    "MAX_ATTEMPTS": 8,
    # A worker's claim is leased this long and renewed every third of it by the heartbeat, so a
    # killed worker's deliveries are back in play within about this long plus the reap interval.
    "LEASE_SECONDS": 30.0,
    # A handler run past this fails with HandlerTimeout (per consumer: @consumer(timeout=...)).
    "HANDLER_TIMEOUT_SECONDS": 300.0,
    # Every slot busy with one run for this long: the claimed, unstarted rest is released.
    "STUCK_RELEASE_SECONDS": 1.0,
    # Abandoned (timed-out) handler threads a worker tolerates before it exits to be restarted.
    "MAX_ABANDONED_THREADS": 8,
    "MAX_PAYLOAD_BYTES": 256 * 1024,
    "MAX_METADATA_BYTES": 8 * 1024,
    "MAX_JSON_DEPTH": 32,
    "NOTIFY_EVENT_TYPES": ["message.received", "ai.handoff_triggered"],
    "HANDLER_MODULES": [],
    "DEAD_LETTER_HOOKS": [],
    # Per-consumer max attempts set by operators (name -> attempts), e.g. ORDER_POST_ATTEMPTS.
    "CONSUMER_MAX_ATTEMPTS": {},
    # Seed 004 §5: the outbox relay (publishes deliveries of broker-run consumers to dramatiq).
    "RELAY_ENABLED": True,  # OUTBOX_RELAY_ENABLED: drain_events also runs the relay
    "WORKER_ENABLED": True,  # WORKER_ENABLED: drain_events runs the drain consumers
    "RELAY_POLL_INTERVAL_MS": 2000,  # OUTBOX_POLL_INTERVAL_MS
    "RELAY_BATCH_SIZE": 50,  # OUTBOX_BATCH_SIZE
    "RELAY_MAX_ATTEMPTS": 10,  # OUTBOX_MAX_ATTEMPTS: publish failures before the delivery dies
    "ARCHIVE_HOT_DAYS": 90,  # R-E6: events older than this are archived, then deleted
    "ARCHIVE_DELETE_BATCH": 5000,  # rows per DELETE after an archive is verified
    "DLQ_ALERT_THRESHOLD": 10,
    "DLQ_ALERT_INTERVAL": 3600.0,
    "DLQ_ALERT_WEBHOOK_URL": "",
    # Cardinality guard: distinct event_type label values per metric (the rest: "other").
    "METRICS_MAX_EVENT_TYPES": 200,
    # Cardinality guard: organizations with their own per-tenant /metrics series (the busiest
    # by settled volume in the last hour); the rest are summed as organization="other".
    "METRICS_TOP_ORGANIZATIONS": 20,
    # Days of per-minute rollup rows kept (status charts, failure rates); purged hourly.
    "ROLLUP_KEEP_DAYS": 8,
}


class BusSettings:
    """Attribute access to `settings.EVENTBUS[...]`, falling back to DEFAULTS."""

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"unknown EVENTBUS setting {name!r}")
        return getattr(settings, "EVENTBUS", {}).get(name, DEFAULTS[name])


bus_settings = BusSettings()
