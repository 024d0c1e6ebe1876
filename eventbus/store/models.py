"""Event bus tables: the event log (what happened) and deliveries (event x consumer: the work).

State changes of deliveries happen only in `eventbus/dispatch/claim.py`; emit writes both tables in
the caller's transaction (`eventbus/store/emitter.py`). Every index says which query it serves.
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex, OpClass
from django.db import models
from django.db.models import Q
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Right, Upper

from eventbus.store.catalog import EVENT_TYPE_PATTERN


class Status(models.TextChoices):
    PENDING = "pending"
    PROCESSING = "processing"
    DONE = "done"
    DEAD = "dead"


# How many trailing characters of an event id the console shows (and searches by): the random
# part of a UUIDv7, where the leading characters are its time and alike on neighbouring rows.
SHORT_ID_CHARS = 8


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    PROCESSING = "processing"
    DONE = "done"
    DEAD = "dead"
    DISCARDED = "discarded"  # an operator removed it from the DLQ (audited); final


class EventLog(models.Model):
    """One row per event (seed 000 §2.1). It records what happened; it is never the unit of work.

    `status` and `consumed_by` summarise the deliveries: `consumed_by` lists the consumers done,
    status is `pending` until a consumer finishes, `processing` while some remain, `done` when all
    are (`fanout` of them), `dead` while any delivery is dead.
    """

    # Payloads may carry a data subject's details; the LGPD redaction scrubs them (R-L3).
    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ("payload", "metadata", "last_error")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No per-row database constraint: each emit statement locks its organization row once
    # (FOR KEY SHARE, as the constraint's check would) and writes nothing when it is missing,
    # instead of a deferred check per event at commit (measured: 60% of emit_many's commit).
    # Django's cascade removes an organization's events with it.
    organization = models.ForeignKey(
        "core.Organization",
        on_delete=models.CASCADE,
        related_name="events",
        db_index=False,
        db_constraint=False,
    )
    event_type = models.TextField()
    entity_kind = models.TextField()
    entity_id = models.UUIDField(null=True, blank=True)
    payload = models.JSONField(default=dict)
    # request_id, trace_id, actor_id, source, idempotency_key, schema_version, emitted_at
    metadata = models.JSONField(default=dict)
    consumed_by = ArrayField(models.TextField(), default=list, blank=True)
    attempts = models.SmallIntegerField(default=0)  # failed attempts, all consumers together
    last_error = models.TextField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)  # latest retry scheduled
    status = models.TextField(choices=Status.choices, default=Status.PENDING)
    # Deliveries that must finish: set at emit, lowered when an operator discards one. The event
    # is done when `consumed_by` holds that many consumers.
    fanout = models.SmallIntegerField(default=0)
    # Also in metadata (seed); a column so the unique index below can serve ON CONFLICT.
    idempotency_key = models.TextField(null=True, blank=True)
    # The catalog's ordering key (a conversation, for message.* and conversation.*) or the emit's
    # own; copied to the deliveries of ordered consumers. The priority (catalog or emit), copied
    # to every delivery (claimed highest first).
    ordering_key = models.TextField(null=True, blank=True)
    priority = models.SmallIntegerField(default=0, db_default=0)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "event_log"
        verbose_name = "event"
        constraints = [
            models.CheckConstraint(
                condition=Q(event_type__regex=EVENT_TYPE_PATTERN), name="event_type_format"
            ),
            models.CheckConstraint(
                condition=Q(status__in=Status.values), name="event_log_status_valid"
            ),
            # emit(idempotency_key=...): the arbiter of the emits' ON CONFLICT DO NOTHING.
            # A partitioned log (eventbus/history/partitions.py) has a plain index of this name
            # instead, and the key table event_log_idempotency holds the uniqueness.
            models.UniqueConstraint(
                fields=["organization", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="event_log_idempotency_uniq",
            ),
        ]
        indexes = [
            # API/admin: an organization's events, newest first. `id` makes the order total, so
            # keyset pages over (created_at, id) are O(limit) even inside a tie (emit_many
            # writes a whole batch with one created_at).
            models.Index(
                fields=["organization", "-created_at", "-id"], name="event_log_org_created_idx"
            ),
            # API/admin: filter by type within an organization (seed index 2).
            models.Index(
                fields=["organization", "event_type", "-created_at"], name="event_log_org_type_idx"
            ),
            # Admin event browser: one type across organizations, newest first (without it a
            # rare type walks the whole created_at index).
            models.Index(fields=["event_type", "-created_at"], name="event_log_type_created_idx"),
            # Everything that happened to one entity (debug, audit, LGPD; seed index 4).
            models.Index(
                fields=["entity_kind", "entity_id", "-created_at"], name="event_log_entity_idx"
            ),
            # Archive/retention scans by age.
            models.Index(fields=["created_at"], name="event_log_created_idx"),
            # Correlation view and admin search: the events one request caused (R-O5). Partial:
            # events emitted outside a request (workers, cron) carry no request id.
            models.Index(
                KeyTextTransform("request_id", "metadata"),
                condition=Q(metadata__has_key="request_id"),
                name="event_log_request_idx",
            ),
        ]
        # The seed's GIN index on consumed_by ("which events did consumer X process") is served by
        # eventbus_delivery (consumer, status) instead: a GIN index would make every ack costlier.
        # For the same reason no index here mentions `status` or `consumed_by` (not even in a
        # partial predicate): the ack's summary update then stays a HOT update, touching no index.
        # "Events with a dead delivery" are found through the deliveries' dead indexes.

    def __str__(self) -> str:
        return f"{self.event_type} {self.id}"

    @property
    def provenance(self) -> dict[str, Any] | None:
        """Who produced the event (eventbus.store.provenance), as the bus recorded it; None for an
        event emitted before provenance was recorded."""
        found = (self.metadata or {}).get("provenance")
        return found if isinstance(found, dict) else None

    @property
    def producer(self) -> str:
        """`api_key:<prefix>`, `pipeline:<id>`, `app:<label>`, `system`, or `unknown`."""
        return str((self.provenance or {}).get("producer") or "unknown")


class Delivery(models.Model):
    """One event x one consumer: the unit of work, of retry, of the DLQ and of metrics."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ("last_error",)  # error texts may quote data

    id = models.BigAutoField(primary_key=True)
    # No database constraint on either key: deliveries are only ever written by the emit
    # statements together with their event (so both keys come from the event row) and deleted
    # before it. The deferred constraint checks cost two lookups and a row lock per delivery at
    # every emit's commit (measured: 80% of emit_many's commit time); Django still cascades.
    event = models.ForeignKey(
        EventLog,
        on_delete=models.CASCADE,
        related_name="deliveries",
        db_index=False,
        db_constraint=False,
    )
    # Denormalised from the event: fair claiming across tenants and tenant-scoped queries.
    organization = models.ForeignKey(
        "core.Organization",
        on_delete=models.CASCADE,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    consumer = models.TextField()
    # Denormalised from the event (set by every emit path): the status page and the DLQ count and
    # filter per event type from the delivery rows and their indexes, never joining the log.
    event_type = models.TextField()
    status = models.TextField(choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.SmallIntegerField(default=0)  # attempts started (claims)
    max_attempts = models.SmallIntegerField(default=8)
    # Broker-run consumers: times the relay failed to hand this delivery to the broker
    # (OUTBOX_MAX_ATTEMPTS of them and it is dead; reprocess resets it).
    publish_failures = models.SmallIntegerField(default=0, db_default=0)
    next_attempt_at = models.DateTimeField()  # due time; set at emit (initial delay) and on nack
    locked_until = models.DateTimeField(null=True, blank=True)  # lease end while processing
    lease_token = models.UUIDField(null=True, blank=True)  # fences ack/nack to the claimer
    locked_by = models.TextField(null=True, blank=True)  # worker id (host:pid) for operators
    last_error = models.TextField(null=True, blank=True)
    error_class = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)  # done or dead at
    # Failure isolation (claim.py, reap.sql): its worker died holding it together with others,
    # so it runs alone next (claim_isolated.sql) and is charged if it kills its worker again.
    isolate = models.BooleanField(default=False, db_default=False)
    # An earlier run may have happened without its outcome being recorded (worker killed,
    # stalled past its lease, disconnected): handlers see it as `event.redelivered`.
    redelivered = models.BooleanField(default=False, db_default=False)
    redelivery_reason = models.TextField(null=True, blank=True)
    # Set by an operator's replay of this consumer over a time window (eventbus/history/replays.py):
    # the run it queued is a replay, and the same replay never queues it twice.
    replay_id = models.UUIDField(null=True, blank=True)
    # Set only for consumers declared ordered=True (the event's key): claim.sql runs one
    # delivery per (consumer, organization, key) at a time, the lowest id (emit order) first.
    ordering_key = models.TextField(null=True, blank=True)
    priority = models.SmallIntegerField(default=0, db_default=0)  # the event's: highest first
    # Its event's `created_at`, written by every path that writes a delivery (the emit
    # statements, emit_event(), replay, restore): the partition key of a partitioned install
    # (eventbus/history/partitions.py), so a month's deliveries are dropped with its events'
    # partition. NULL only on rows written before migration 0022; the partition upgrade fills those.
    event_created_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        verbose_name_plural = "deliveries"
        permissions = [
            ("retry_delivery", "Can retry deliveries waiting to retry now"),
        ]
        constraints = [
            # One delivery per (event, consumer); also serves "the deliveries of event X".
            models.UniqueConstraint(
                fields=["event", "consumer"], name="delivery_event_consumer_uniq"
            ),
            models.CheckConstraint(
                condition=Q(status__in=DeliveryStatus.values), name="delivery_status_valid"
            ),
        ]
        indexes = [
            # The claim: per organization and consumer, due pending work, highest priority
            # first, then in due order. Only pending rows are in it, so a claim costs O(batch),
            # not O(backlog); the leading organization_id also serves the loose scan that lists
            # organizations with work.
            models.Index(
                fields=["organization", "consumer", "-priority", "next_attempt_at"],
                condition=Q(status="pending"),
                name="delivery_claim_idx",
            ),
            # Ordered consumers: is an earlier delivery of this key still pending, or one
            # running? (claim.sql). Only keyed, unfinished rows are in it.
            models.Index(
                fields=["consumer", "organization", "ordering_key", "id"],
                condition=Q(ordering_key__isnull=False, status__in=["pending", "processing"]),
                name="delivery_ordering_idx",
            ),
            # Ordered consumers: is one of this key's deliveries running? One probe per
            # candidate head, whatever the key's backlog (claim.sql). Only running keyed rows.
            models.Index(
                fields=["consumer", "organization", "ordering_key"],
                condition=Q(ordering_key__isnull=False, status="processing"),
                name="delivery_ordering_busy_idx",
            ),
            # claim_isolated.sql: deliveries waiting to run alone (usually none).
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status="pending", isolate=True),
                name="delivery_isolated_idx",
            ),
            # The reaper: leases that ran out.
            models.Index(
                fields=["locked_until"], condition=Q(status="processing"), name="delivery_lease_idx"
            ),
            # The DLQ, newest deaths first, and per consumer.
            models.Index(
                fields=["consumer", "-finished_at"],
                condition=Q(status="dead"),
                name="delivery_dead_idx",
            ),
            # The DLQ screen without a consumer filter: newest deaths first, "died at" periods;
            # covering for the status page's dead counts (index-only, no heap visit per letter).
            # Only dead rows are in it, so it costs nothing on the hot path.
            models.Index(
                fields=["-finished_at", "-id"],
                include=["event_type", "organization_id", "consumer"],
                condition=Q(status="dead"),
                name="delivery_dlq_idx",
            ),
            # The DLQ's error-class filter choices (a loose scan of dead rows only).
            models.Index(
                fields=["error_class"], condition=Q(status="dead"), name="delivery_dead_error_idx"
            ),
            # The DLQ's size per (event type, consumer, organization) for the status page and
            # /metrics (sql/dlq_sizes.sql: a loose scan, then a range count per group), and its
            # event-type filter choices (a loose scan of the leading column): a million-row DLQ
            # lists its types in a few probes.
            models.Index(
                fields=["event_type", "consumer", "organization"],
                condition=Q(status="dead"),
                name="delivery_dead_group_idx",
            ),
            # ... and its organization filter choices: the tenants that have dead letters.
            models.Index(
                fields=["organization"], condition=Q(status="dead"), name="delivery_dead_org_idx"
            ),
            # "Which events did consumer X process" (replaces the seed's GIN), the status page's
            # throughput (done per consumer since a time) and the consumer filter's choices (a
            # loose scan). Partial: emit and claim write no entry here, only the ack does.
            models.Index(
                fields=["consumer", "finished_at"],
                condition=Q(status="done"),
                name="delivery_consumer_done_idx",
            ),
            # The deliveries list's "retrying" filter: pending again after a failure, newest
            # first. Only the nack writes an entry (emit's rows have no error, the ack clears it).
            models.Index(
                fields=["id"],
                condition=Q(status="pending", last_error__isnull=False),
                name="delivery_retrying_idx",
            ),
            # ... and its "discarded" filter (only an operator's Discard writes an entry).
            models.Index(
                fields=["id"], condition=Q(status="discarded"), name="delivery_discarded_idx"
            ),
            # The DLQ search by the short id it shows: the last characters of the event id (the
            # random part of a UUIDv7; its first ones are the time, alike on every row).
            models.Index(
                Right(Cast("event_id", models.TextField()), SHORT_ID_CHARS),
                condition=Q(status="dead"),
                name="delivery_dead_short_id_idx",
            ),
            # Search in error texts (DLQ, deliveries list): a trigram index for
            # `upper(last_error) LIKE '%TERM%'` (Django's icontains). Rows with an error only:
            # waiting to retry or dead; the ack clears the error.
            GinIndex(
                OpClass(Upper("last_error"), name="gin_trgm_ops"),
                condition=Q(last_error__isnull=False),
                name="delivery_error_trgm_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.consumer} <- {self.event_id}"


class DeadLetter(Delivery):
    """The DLQ as the admin sees it: deliveries with status `dead` (a proxy, no table).

    Its custom permissions gate the operator actions, so support staff need not be superusers.
    """

    class Meta:
        proxy = True
        verbose_name = "dead letter"
        verbose_name_plural = "dead letters (DLQ)"
        permissions = [
            ("reprocess_deadletter", "Can reprocess dead letters"),
            ("discard_deadletter", "Can discard dead letters"),
        ]


class DeliveryAttempt(models.Model):
    """History of failed attempts (a success is the delivery row itself: fewer writes)."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ("error", "traceback")

    class Outcome(models.TextChoices):
        RETRY = "retry"
        DEAD = "dead"

    id = models.BigAutoField(primary_key=True)
    # No database constraint: a partitioned delivery table's primary key is (id,
    # event_created_at), which a key on delivery_id alone cannot reference. Attempts are only
    # written by nack.sql for a delivery it has just updated, and deleted before it (the
    # archive, the organization cascade); Django still cascades.
    delivery = models.ForeignKey(
        Delivery, on_delete=models.CASCADE, related_name="attempt_log", db_constraint=False
    )
    attempt = models.SmallIntegerField()
    outcome = models.TextField(choices=Outcome.choices)
    error_class = models.TextField(blank=True, default="")
    error = models.TextField(blank=True, default="")
    duration_ms = models.IntegerField(null=True, blank=True)
    worker = models.TextField(blank=True, default="")
    # The handler's traceback (eventbus/store/tracebacks.py: bounded, redacted); NULL when there was
    # none (an HTTP answer, a publish failure, an expired lease) and in rows written before it.
    traceback = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField()
    # Its delivery's event_created_at (the partition key, see Delivery).
    event_created_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["delivery_id", "attempt"]
        indexes = [
            # The status page's failures in the last hour (a range; rows exist only for
            # failures, so success costs nothing here).
            models.Index(fields=["created_at"], name="delivery_attempt_created_idx"),
        ]


class Route(models.Model):
    """Mirror of the consumer registry for the `emit_event` SQL function (triggers).

    Synced by `eventbus.store.routes.sync_routes()` at migrate, at worker start and by
    `manage.py list_consumers --sync`.
    """

    consumer = models.TextField()
    event_type = models.TextField()
    max_attempts = models.SmallIntegerField()
    delay_seconds = models.FloatField(default=0)
    ordered = models.BooleanField(default=False, db_default=False)  # @consumer(ordered=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["event_type", "consumer"], name="route_type_consumer_uniq"
            )
        ]


class EventTypeSchema(models.Model):
    """Mirror of the catalog (latest versions) so `emit_event` validates like `eventbus.emit`."""

    name = models.TextField(primary_key=True)
    version = models.IntegerField()
    required = ArrayField(models.TextField(), default=list)
    notify = models.BooleanField(default=False)  # emit_event sends the LISTEN/NOTIFY wake-up
    priority = models.SmallIntegerField(default=0, db_default=0)  # catalog.priority_of
    ordered_by = models.TextField(null=True, blank=True)  # catalog.ordered_by


class DlqAlertState(models.Model):
    """When each consumer's DLQ growth alert last went out: at most one per interval."""

    consumer = models.TextField(primary_key=True)
    last_sent_at = models.DateTimeField()
    dead_in_window = models.IntegerField(default=0)  # what the last alert reported


class ConsumerRunState(models.TextChoices):
    RUNNING = "running"  # claimed as usual (breaker closed)
    PAUSED = "paused"  # an operator paused it: nothing claimed, nothing charged
    OPEN = "open"  # the circuit breaker paused it; a probe runs after the cool-down
    HALF_OPEN = "half_open"  # one probe delivery is running: success closes, failure re-opens


class ConsumerState(models.Model):
    """A consumer's pause and circuit-breaker state (eventbus/store/pauses.py,
    eventbus/dispatch/breaker.py).

    No row, or `running`: claimed as usual. Any other state keeps its deliveries pending with no
    attempt charged (the claims skip it; see sql/claim.sql). The window counts are the breaker's
    (a tumbling window of settled outcomes, flushed by each process about once a second).
    Webhook subscriptions pause here too, as their consumer name `webhook:<uuid>`.
    """

    consumer = models.TextField(primary_key=True)
    state = models.CharField(
        max_length=16, choices=ConsumerRunState.choices, default=ConsumerRunState.RUNNING
    )
    since = models.DateTimeField()
    reason = models.TextField(blank=True)
    changed_by = models.TextField(blank=True)  # the operator, or system:breaker
    probe_at = models.DateTimeField(null=True, blank=True)  # open: when the probe may run
    window_started_at = models.DateTimeField(null=True, blank=True)
    window_ok = models.IntegerField(default=0)
    window_failed = models.IntegerField(default=0)

    class Meta:
        db_table = "eventbus_consumer_state"
        permissions = [
            ("pause_consumer", "Can pause and resume consumers"),
            ("replay_consumer", "Can replay a consumer over a time window"),
        ]

    def __str__(self) -> str:
        return f"{self.consumer}: {self.state}"

    @property
    def paused(self) -> bool:
        return self.state != ConsumerRunState.RUNNING


class Rollup(models.Model):
    """Per minute, organization and consumer: settled outcomes and the sampled lag (the status
    page's charts, the per-tenant /metrics figures, circuit breakers' failure rates).

    The counters are added to by the settle statements themselves (ack.sql, nack.sql: one upsert
    per statement, from the rows it changed), so a lost lease or a repeated settle counts nothing
    twice. `lag_seconds` is written by the sampler job (rollup_sample.sql), once a minute. No
    index names a counter, and pages keep room (fillfactor 50, migration 0017), so the upserts
    stay HOT. Old rows are purged by the `eventbus-rollup-purge` job.
    """

    pk = models.CompositePrimaryKey("bucket_start", "consumer", "organization_id", "shard")
    # Start of the minute (UTC); the primary key's leading column serves every time range.
    bucket_start = models.DateTimeField()
    consumer = models.TextField()
    # No foreign key: counts only, no personal data; a deleted tenant's rows age out with the purge.
    organization_id = models.UUIDField()
    done = models.IntegerField(default=0, db_default=0)
    failed = models.IntegerField(default=0, db_default=0)  # failed attempts to be retried
    dead = models.IntegerField(default=0, db_default=0)  # attempts that dead-lettered
    lag_seconds = models.FloatField(null=True)  # oldest due pending delivery, when sampled
    # The writing connection's backend pid: concurrent settles of one consumer and organization
    # (two workers, two slots) add to rows of their own instead of queueing on one row's lock
    # until the other commits. Readers sum over it (a pair has one row per connection that
    # settled it in that minute).
    shard = models.IntegerField(default=0, db_default=0)

    class Meta:
        db_table = "eventbus_rollup"
