"""The consumer registry: named handlers, the event types they consume, and their retry policy.

Consumers are declared with `@eventbus.consumer(...)` in each app's `handlers.py` (imported at
start-up by `EventbusConfig.ready`). The registry is mirrored into the `eventbus_route` table so the
`emit_event` SQL function (used by triggers) fans out exactly like `eventbus.emit`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from eventbus.store.catalog import validate_event_type
from eventbus.store.errors import ConsumerRegistrationError, EventValidationError

if TYPE_CHECKING:
    from eventbus.store.event import Event

Handler = Callable[["Event"], None]
# A batch consumer's handler: up to `batch` events of one claim, one consumer, one organization.
BatchHandler = Callable[[list["Event"]], None]
H = TypeVar("H", bound=Callable[..., None])  # a handler, either kind, as the decorator returns it
# The most events one batch handler call may receive.
MAX_BATCH = 1000
# An initial delay, or a callable giving it at call time (so a setting such as the LGPD export's
# D+7 is read when an event is emitted, not when the handler module is imported).
Delay = dt.timedelta | Callable[[], dt.timedelta]
# Where a consumer runs: claimed by `drain_events` itself, or published by the relay to the
# dramatiq broker and run by the jobs process (`rundramatiq`); the database owns retries either way.
RunsOn = Literal["drain", "broker"]
RUNS_ON: tuple[str, ...] = get_args(RunsOn)
CONSUMER_NAME_PATTERN = r"^[a-z][a-z0-9]*(-[a-z0-9]+)*-worker$"
_NAME_RE = re.compile(CONSUMER_NAME_PATTERN)


@dataclass(frozen=True)
class Consumer:
    """A registered handler and its policy."""

    name: str
    handler: Handler | BatchHandler
    events: tuple[str, ...]
    max_attempts: int | None = None  # None: settings.EVENTBUS["MAX_ATTEMPTS"]
    delay: Delay | None = None  # initial delay before the first attempt
    atomic: bool = False  # run the handler and the ack in one transaction
    runs_on: RunsOn = "drain"
    timeout: dt.timedelta | None = None  # None: settings.EVENTBUS["HANDLER_TIMEOUT_SECONDS"]
    # One delivery per ordering key at a time, in emit order (eventbus/store/sql/claim.sql).
    ordered: bool = False
    # Up to this many deliveries per handler call, acked in the handler's transaction (None:
    # one event per call, as declared without it).
    batch: int | None = None

    @property
    def delay_seconds(self) -> float:
        delay = self.delay() if callable(self.delay) else self.delay
        return max(delay.total_seconds(), 0.0) if delay else 0.0

    def effective_max_attempts(self) -> int:
        from eventbus.store.conf import bus_settings

        # An operator's per-consumer setting (e.g. ORDER_POST_ATTEMPTS) wins over the declaration.
        configured = bus_settings.CONSUMER_MAX_ATTEMPTS.get(self.name)
        return configured or self.max_attempts or bus_settings.MAX_ATTEMPTS

    def timeout_seconds(self) -> float:
        """How long one run may take before it fails with `HandlerTimeout`."""
        from eventbus.store.conf import bus_settings

        if self.timeout is not None:
            return self.timeout.total_seconds()
        return bus_settings.HANDLER_TIMEOUT_SECONDS

    @property
    def label(self) -> str:
        return f"{self.handler.__module__}.{getattr(self.handler, '__qualname__', '?')}"


@dataclass(frozen=True)
class RouteColumns:
    """An event type's consumers as the emit statement's array parameters, one entry each,
    written once as PostgreSQL array literals (the statement casts them: `::text[]`, ...).

    Passing the literals costs psycopg a string each; four lists cost emit() ~12 us to dump.
    """

    consumers: str
    max_attempts: str
    delays: str
    ordered: str

    @classmethod
    def of(cls, routes: Iterable[Consumer]) -> RouteColumns:
        routes = tuple(routes)
        return cls(
            _array_literal(_quoted(c.name) for c in routes),
            _array_literal(str(c.effective_max_attempts()) for c in routes),
            _array_literal(repr(float(c.delay_seconds)) for c in routes),
            _array_literal("t" if c.ordered else "f" for c in routes),
        )


def _array_literal(elements: Iterable[str]) -> str:
    return "{" + ",".join(elements) + "}"


def _quoted(text: str) -> str:
    """An array element as PostgreSQL reads it back unchanged, whatever its characters."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Registry:
    """Name -> Consumer, plus the event type -> consumers index used by emit."""

    def __init__(self) -> None:
        self._consumers: dict[str, Consumer] = {}
        self._by_event: dict[str, tuple[Consumer, ...]] = {}
        # event type -> (the settings.EVENTBUS they were worked out from, its RouteColumns)
        self._columns: dict[str, tuple[object, RouteColumns]] = {}

    def register(self, consumer: Consumer) -> None:
        existing = self._consumers.get(consumer.name)
        if existing is not None and existing.label != consumer.label:
            raise ConsumerRegistrationError(
                f"consumer name {consumer.name!r} is already used by {existing.label}"
            )
        self._consumers[consumer.name] = consumer
        self._reindex()

    def unregister(self, name: str) -> None:
        self._consumers.pop(name, None)
        self._reindex()

    def _reindex(self) -> None:
        index: dict[str, list[Consumer]] = {}
        for consumer in sorted(self._consumers.values(), key=lambda c: c.name):
            for event_type in consumer.events:
                index.setdefault(event_type, []).append(consumer)
        self._by_event = {k: tuple(v) for k, v in index.items()}
        self._columns = {}

    def for_event(self, event_type: str) -> tuple[Consumer, ...]:
        return self._by_event.get(event_type, ())

    def columns_for(self, event_type: str) -> RouteColumns:
        """`for_event(event_type)` as emit's parameters, worked out once while neither the
        registry nor `settings.EVENTBUS` (max attempts) changes. A type with a consumer whose
        delay is a callable is worked out on every call: the delay is read at emit time."""
        from eventbus.store.conf import bus_settings

        routes = self.for_event(event_type)
        if any(callable(c.delay) for c in routes):
            return RouteColumns.of(routes)
        return bus_settings.derived(self._columns, event_type, lambda: RouteColumns.of(routes))

    def get(self, name: str) -> Consumer:
        try:
            return self._consumers[name]
        except KeyError:
            known = ", ".join(sorted(self._consumers)) or "none"
            raise ConsumerRegistrationError(
                f"unknown consumer {name!r} (registered: {known})"
            ) from None

    def find(self, name: str | None) -> Consumer | None:
        return self._consumers.get(name) if name else None

    def all(self) -> list[Consumer]:
        return sorted(self._consumers.values(), key=lambda c: c.name)

    def running_on(self, runs_on: RunsOn) -> list[Consumer]:
        """The consumers the drain runs itself, or those the relay publishes to the broker."""
        return [c for c in self.all() if c.runs_on == runs_on]

    @contextmanager
    def temporarily(self, *consumers: Consumer) -> Iterator[None]:
        """Register (or replace) consumers for the duration of a block (tests, one-off scripts)."""
        saved = dict(self._consumers)
        try:
            self._consumers.update({c.name: c for c in consumers})
            self._reindex()
            yield
        finally:
            self._consumers = saved
            self._reindex()


registry = Registry()


def make_consumer(
    name: str,
    handler: Handler | BatchHandler,
    *,
    events: Iterable[str],
    max_attempts: int | None = None,
    delay: Delay | None = None,
    atomic: bool = False,
    runs_on: RunsOn = "drain",
    timeout: float | dt.timedelta | None = None,
    ordered: bool = False,
    batch: int | None = None,
) -> Consumer:
    """Validate a declaration and build the Consumer (does not register it). A batch consumer
    is always atomic: its handler's writes commit with the ack of the events it was given."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ConsumerRegistrationError(
            f"invalid consumer name {name!r}: kebab-case ending in '-worker', "
            "e.g. 'contact-sync-worker'"
        )
    event_list = tuple(events)
    if not event_list or isinstance(events, str):
        raise ConsumerRegistrationError(f"{name}: events must be a non-empty list of event types")
    try:
        for event_type in event_list:
            validate_event_type(event_type)
    except EventValidationError as exc:
        raise ConsumerRegistrationError(f"{name}: {exc}") from None
    if max_attempts is not None and not 1 <= max_attempts <= 100:
        raise ConsumerRegistrationError(f"{name}: max_attempts must be between 1 and 100")
    if isinstance(delay, dt.timedelta) and delay < dt.timedelta(0):
        raise ConsumerRegistrationError(f"{name}: delay must not be negative")
    if runs_on not in RUNS_ON:
        raise ConsumerRegistrationError(
            f"{name}: runs_on must be one of {RUNS_ON}, got {runs_on!r}"
        )
    if not isinstance(ordered, bool):
        raise ConsumerRegistrationError(f"{name}: ordered must be True or False")
    limit = _timeout(name, timeout)
    _check_batch(name, batch, runs_on)
    atomic = atomic or batch is not None
    return Consumer(
        name, handler, event_list, max_attempts, delay, atomic, runs_on, limit, ordered, batch
    )


def _check_batch(name: str, batch: int | None, runs_on: RunsOn) -> None:
    if batch is None:
        return
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
        raise ConsumerRegistrationError(f"{name}: batch must be between 1 and {MAX_BATCH}")
    if runs_on != "drain":
        raise ConsumerRegistrationError(f"{name}: a batch consumer runs on the drain only")


def _timeout(name: str, timeout: float | dt.timedelta | None) -> dt.timedelta | None:
    if timeout is None:
        return None
    if not isinstance(timeout, dt.timedelta):
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise ConsumerRegistrationError(f"{name}: timeout must be seconds or a timedelta")
        timeout = dt.timedelta(seconds=timeout)
    if timeout <= dt.timedelta(0):
        raise ConsumerRegistrationError(f"{name}: timeout must be positive")
    return timeout


def consumer(
    name: str,
    *,
    events: Iterable[str],
    max_attempts: int | None = None,
    delay: Delay | None = None,
    atomic: bool = False,
    runs_on: RunsOn = "drain",
    timeout: float | dt.timedelta | None = None,
    ordered: bool = False,
    batch: int | None = None,
) -> Callable[[H], H]:
    """Register `fn(event) -> None` as consumer `name` of `events`.

    Raising `eventbus.PermanentError` dead-letters the delivery at once; any other exception is
    transient and retried with backoff up to `max_attempts`. `delay` postpones the first attempt
    (LGPD export: D+7); it may be a callable returning the delay, read at each emit (a setting).
    `atomic=True` commits the handler's database writes together with the ack,
    so a killed worker can never leave them half-applied or applied twice. `runs_on="broker"`
    hands the consumer to the jobs process: the relay publishes each due delivery to the dramatiq
    broker and the actor runs it and acks/nacks the same delivery row. `timeout` (seconds or a
    timedelta; default EVENTBUS_HANDLER_TIMEOUT_SECONDS) bounds one run: past it the attempt
    fails with `HandlerTimeout` and is retried per the table, and the worker's slot is freed.
    `ordered=True` runs at most one delivery per ordering key (the catalog's: a conversation for
    `message.*` and `conversation.*`, or the emit's `ordering_key`) at a time, across all
    workers, in emit order: a delivery waiting for a retry holds back the later ones of its key
    until it is done or dead-lettered (the dead letter releases the key). Events without a key
    run unordered.
    `batch=N` makes a batch consumer: `fn(events: list[Event]) -> None` receives up to N
    deliveries of one claim, all of one organization, in emit order, and its writes commit with
    their ack. When the call fails the bus splits the batch and tries the halves, down to single
    events, so only the event that fails is charged an attempt (retried, dead-lettered as usual).
    """

    def decorate(fn: H) -> H:
        registry.register(
            make_consumer(
                name,
                fn,
                events=events,
                max_attempts=max_attempts,
                delay=delay,
                atomic=atomic,
                runs_on=runs_on,
                timeout=timeout,
                ordered=ordered,
                batch=batch,
            )
        )
        return fn

    return decorate


def route_rows(consumers: Iterable[Consumer]) -> list[tuple[str, str, int, float, bool]]:
    """(consumer, event_type, max_attempts, delay_seconds, ordered) rows for the route table."""
    return [
        (c.name, event_type, c.effective_max_attempts(), c.delay_seconds, c.ordered)
        for c in consumers
        for event_type in c.events
    ]


def describe(consumer_: Consumer) -> dict[str, Any]:
    return {
        "name": consumer_.name,
        "events": list(consumer_.events),
        "max_attempts": consumer_.effective_max_attempts(),
        "delay_seconds": consumer_.delay_seconds,
        "atomic": consumer_.atomic,
        "runs_on": consumer_.runs_on,
        "timeout_seconds": consumer_.timeout_seconds(),
        "ordered": consumer_.ordered,
        "batch": consumer_.batch,
        "handler": consumer_.label,
    }
