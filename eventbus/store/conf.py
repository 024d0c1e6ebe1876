"""The event bus knobs, read from `settings.EVENTBUS` at call time (so tests can override them)."""

from __future__ import annotations

from collections.abc import Mapping

from core.conf import AppSettings


class BusSettings(AppSettings, namespace="EVENTBUS"):
    """Each `settings.EVENTBUS` knob with its type and default (env names: deskcomm/settings.py)."""

    # Backoff after the n-th failed attempt, in seconds (30s, 1m, 2m, 5m, 10m, 30m, 1h, 2h).
    RETRY_SCHEDULE: tuple[float, ...] = (30, 60, 120, 300, 600, 1800, 3600, 7200)
    RETRY_JITTER: float = 0.3
    MAX_ATTEMPTS: int = 8
    # A worker's claim is leased this long and renewed every third of it by the heartbeat, so a
    # killed worker's deliveries are back in play within about this long plus the reap interval.
    LEASE_SECONDS: float = 30.0
    # A handler run past this fails with HandlerTimeout (per consumer: @consumer(timeout=...)).
    HANDLER_TIMEOUT_SECONDS: float = 300.0
    # Every slot busy with one run for this long: the claimed, unstarted rest is released.
    STUCK_RELEASE_SECONDS: float = 1.0
    # An atomic consumer's deliveries of one claim (organization, key) per transaction: one ack
    # and one commit for those that succeeded; after a failure the group runs again with a
    # savepoint each (1: one transaction per delivery).
    ATOMIC_GROUP: int = 50
    # Abandoned (timed-out) handler threads a worker tolerates before it exits to be restarted.
    MAX_ABANDONED_THREADS: int = 8
    MAX_PAYLOAD_BYTES: int = 256 * 1024
    MAX_METADATA_BYTES: int = 8 * 1024
    MAX_JSON_DEPTH: int = 32
    # An emit at or above this priority (catalog.priority_of, or the emit's own) wakes idle
    # workers through LISTEN/NOTIFY at commit; so do the types listed in NOTIFY_EVENT_TYPES.
    NOTIFY_MIN_PRIORITY: int = 5
    NOTIFY_EVENT_TYPES: tuple[str, ...] = ()
    HANDLER_MODULES: tuple[str, ...] = ()
    DEAD_LETTER_HOOKS: tuple[str, ...] = ()
    # Per-consumer max attempts set by operators (name -> attempts), e.g. ORDER_POST_ATTEMPTS.
    CONSUMER_MAX_ATTEMPTS: Mapping[str, int] = {}
    # Seed 004 §5: the outbox relay (publishes deliveries of broker-run consumers to dramatiq).
    RELAY_ENABLED: bool = True  # OUTBOX_RELAY_ENABLED: drain_events also runs the relay
    WORKER_ENABLED: bool = True  # WORKER_ENABLED: drain_events runs the drain consumers
    RELAY_POLL_INTERVAL_MS: int = 2000  # OUTBOX_POLL_INTERVAL_MS
    RELAY_BATCH_SIZE: int = 50  # OUTBOX_BATCH_SIZE
    RELAY_MAX_ATTEMPTS: int = 10  # OUTBOX_MAX_ATTEMPTS: publish failures before the delivery dies
    ARCHIVE_HOT_DAYS: int = 90  # R-E6: events older than this are archived, then deleted
    ARCHIVE_DELETE_BATCH: int = 5000  # rows per DELETE after an archive is verified
    # The partitioned event log (eventbus/history/partitions.py): months of partitions kept ready
    # after this one, the health check's minimum, and each partition's fillfactor (HOT summary
    # updates).
    PARTITIONS_AHEAD: int = 3  # EVENT_LOG_PARTITIONS_AHEAD
    PARTITIONS_MIN_AHEAD: int = 2
    PARTITION_FILLFACTOR: int = 80
    DLQ_ALERT_THRESHOLD: int = 10
    DLQ_ALERT_INTERVAL: float = 3600.0
    DLQ_ALERT_WEBHOOK_URL: str = ""
    # The circuit breaker per consumer (eventbus/dispatch/breaker.py): open (pause) a consumer when
    # at least FAILURE_RATE of at least MIN_VOLUME settled deliveries failed within WINDOW_SECONDS;
    # after COOL_DOWN_SECONDS one probe delivery runs (half-open). Webhook subscriptions have their
    # own.
    BREAKER_ENABLED: bool = True
    BREAKER_FAILURE_RATE: float = 0.5
    BREAKER_MIN_VOLUME: int = 20
    BREAKER_WINDOW_SECONDS: float = 60.0
    BREAKER_COOL_DOWN_SECONDS: float = 30.0
    # Per-consumer overrides of the numbers (FAILURE_RATE, MIN_VOLUME, WINDOW_SECONDS,
    # COOL_DOWN_SECONDS), e.g. {"order-post-worker": {"MIN_VOLUME": 5}}.
    BREAKER_CONSUMERS: Mapping[str, Mapping[str, float]] = {}
    # Cardinality guard: distinct event_type label values per metric (the rest: "other").
    METRICS_MAX_EVENT_TYPES: int = 200
    # Cardinality guard: organizations with their own per-tenant /metrics series (the busiest
    # by settled volume in the last hour); the rest are summed as organization="other".
    METRICS_TOP_ORGANIZATIONS: int = 20
    # Days of per-minute rollup rows kept (status charts, failure rates); purged hourly.
    ROLLUP_KEEP_DAYS: int = 8
    # The longest causation chain an emit may extend (eventbus.store.provenance): an event emitted
    # while handling one at this depth is refused. The platform's longest chain is 4
    # (store_connected > full_resync > sync_page > product_synced); 8 leaves four pipeline hops
    # on top and stops a loop within eight generations.
    MAX_CAUSATION_DEPTH: int = 8
    # Events an organization may emit per minute through the API and pipelines together
    # (429 + Retry-After at the API; a failed node in a pipeline). The app's own emits are not
    # counted.
    DOOR_EMIT_RATE: str = "600/minute"


bus_settings = BusSettings()
