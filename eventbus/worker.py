"""The drain worker: claim due deliveries, run them, settle them, repeat.

Loop hygiene: claim again at once while there was work, wait only when a claim came back empty
(woken early by LISTEN/NOTIFY or a stop request), back off with a cap when the database goes away,
reap expired leases now and then. First SIGTERM/SIGINT: stop claiming, finish what started,
release what did not, exit 0. Second: exit at once (leases expire and the reaper recovers).

Consumers declared `runs_on="broker"` are not run here: the outbox relay (a thread of the same
process, `OUTBOX_RELAY_ENABLED`) publishes their deliveries to the job broker instead.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

import psycopg
from django.db import DatabaseError, close_old_connections, connection, connections

from deskcomm.db import conninfo
from eventbus import claim as claims
from eventbus.alerts import notify_dead
from eventbus.conf import bus_settings
from eventbus.dispatch import Dispatcher, Outcome
from eventbus.emitter import WAKEUP_CHANNEL
from eventbus.errors import ConsumerRegistrationError
from eventbus.registry import Consumer, registry
from eventbus.relay import Relay

logger = logging.getLogger(__name__)

MAX_DB_BACKOFF = 30.0
REAP_INTERVAL = 60.0


@dataclass
class WorkerOptions:
    consumers: Sequence[str] | None = None  # None: every registered consumer
    batch_size: int = 100
    poll_interval: float = 1.0
    concurrency: int = 1
    once: bool = False  # drain what is due, then exit
    max_events: int | None = None  # exit after processing this many deliveries
    listen: bool = True
    startup_jitter: float = 0.25
    drain: bool = True  # run the drain consumers (WORKER_ENABLED)
    relay: bool = False  # also publish broker-run deliveries (OUTBOX_RELAY_ENABLED)


class Worker:
    """`run()` until stopped; `run_once()` claims and processes one batch; `request_stop()`."""

    def __init__(self, options: WorkerOptions | None = None) -> None:
        self.options = options or WorkerOptions()
        self.consumers = _select_consumers(self.options.consumers) if self.options.drain else []
        self.names = [c.name for c in self.consumers]
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}"
        self.processed = 0
        self._stop = threading.Event()
        self._wakeup = threading.Event()
        self._relay_wakeup = threading.Event()
        self.relay = Relay(worker_id=self.worker_id) if self.options.relay else None
        self._inflight: dict[uuid.UUID, list[int]] = {}
        self._inflight_lock = threading.Lock()
        self._unsettled: list[tuple[uuid.UUID, Outcome]] = []
        self._next_reap = 0.0
        self._signals_seen = 0
        self._dispatcher = Dispatcher(
            self.consumers,
            worker_id=self.worker_id,
            concurrency=self.options.concurrency,
            stopping=self._stop.is_set,
        )

    # -- public API -------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Stop claiming; the batch in progress finishes (unstarted deliveries are released)."""
        self._stop.set()
        self._wakeup.set()
        self._relay_wakeup.set()

    def run(self) -> int:
        """Work until stopped (or `once`/`max_events` says so). Returns the exit code."""
        previous = self._install_signal_handlers()
        threads = [self._start(self._heartbeat_loop, "eventbus-heartbeat")]
        if self.options.listen:
            threads.append(self._start(self._listen_loop, "eventbus-listen"))
        relaying = self.relay is not None and bool(self.relay.names)
        if relaying and not self.options.once:
            threads.append(self._start(self._relay_loop, "eventbus-relay"))
        logger.info(
            "worker %s started: consumers=%s batch=%d concurrency=%d relay=%s",
            self.worker_id,
            ",".join(self.names),
            self.options.batch_size,
            self.options.concurrency,
            ",".join(self.relay.names) if relaying and self.relay else "off",
        )
        try:
            self._stop.wait(random.uniform(0, self.options.startup_jitter))
            if relaying and self.options.once:
                self.relay_due()
            self._loop()
        finally:
            self._stop.set()
            self._settle_leftovers()
            for thread in threads:
                thread.join(timeout=5)
            self._dispatcher.close()
            self._restore_signal_handlers(previous)
            connections.close_all()
        logger.info("worker %s stopped after %d deliveries", self.worker_id, self.processed)
        return 0

    def run_once(self) -> int:
        """Claim one batch, run it, settle it. Returns how many deliveries were claimed."""
        self._retry_unsettled()
        self._maybe_reap()
        batch = claims.claim(
            consumers=self.names, batch_size=self._batch_size(), worker_id=self.worker_id
        )
        if not batch.events:
            return 0
        with self._inflight_lock:
            self._inflight[batch.token] = batch.ids
        try:
            outcome = self._dispatcher.run(batch)
        finally:
            with self._inflight_lock:
                self._inflight.pop(batch.token, None)
        self._settle(batch.token, outcome)
        self.processed += outcome.processed
        return len(batch.events)

    def relay_due(self) -> int:
        """Publish every due broker-run delivery (one relay batch after another)."""
        published = 0
        batch_size = int(bus_settings.RELAY_BATCH_SIZE)
        while self.relay is not None:
            claimed = self.relay.run_once()
            published += claimed
            if claimed < batch_size:
                break
        return published

    # -- the loop ---------------------------------------------------------------------------

    def _loop(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                close_old_connections()
                claimed = self.run_once()
                failures = 0
            except DatabaseError as exc:
                failures += 1
                self._back_off(exc, failures)
                continue
            if self._finished(claimed):
                return
            if claimed == 0:
                self._idle_wait()

    def _finished(self, claimed: int) -> bool:
        limit = self.options.max_events
        if limit is not None and self.processed >= limit:
            return True
        return self.options.once and claimed == 0

    def _idle_wait(self) -> None:
        self._wakeup.wait(self.options.poll_interval)
        self._wakeup.clear()

    def _back_off(self, exc: Exception, failures: int) -> None:
        delay = min(MAX_DB_BACKOFF, 0.5 * 2 ** (failures - 1)) * random.uniform(0.8, 1.2)
        logger.warning(
            "database error (%s: %s); reconnecting in %.1fs (failure %d)",
            type(exc).__name__,
            str(exc).strip(),
            delay,
            failures,
        )
        connection.close_if_unusable_or_obsolete()
        try:
            connection.close()
        except DatabaseError:
            logger.debug("closing the broken connection failed", exc_info=True)
        self._stop.wait(delay)

    def _batch_size(self) -> int:
        if self.options.max_events is None:
            return self.options.batch_size
        return max(1, min(self.options.batch_size, self.options.max_events - self.processed))

    # -- settling ---------------------------------------------------------------------------

    def _settle(self, token: uuid.UUID, outcome: Outcome) -> None:
        try:
            self._dispatcher.settle(token, outcome)
        except DatabaseError:
            # Fenced statements are safe to repeat: keep the results and retry next pass.
            self._unsettled.append((token, outcome))
            raise

    def _retry_unsettled(self) -> None:
        while self._unsettled:
            token, outcome = self._unsettled[0]
            self._dispatcher.settle(token, outcome)
            self._unsettled.pop(0)

    def _settle_leftovers(self) -> None:
        try:
            self._retry_unsettled()
        except DatabaseError:
            logger.error(
                "could not settle %d batch(es) before exit; their leases will expire",
                len(self._unsettled),
            )

    def _maybe_reap(self) -> None:
        if time.monotonic() < self._next_reap:
            return
        self._next_reap = time.monotonic() + REAP_INTERVAL
        _, dead = claims.reap(worker_id=self.worker_id)
        notify_dead(dead)

    # -- background threads -----------------------------------------------------------------

    def _start(self, target: Any, name: str) -> threading.Thread:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        return thread

    def _heartbeat_loop(self) -> None:
        """Extend the lease of running batches every third of the lease."""
        interval = float(bus_settings.LEASE_SECONDS) / 3
        try:
            while not self._stop.wait(interval):
                with self._inflight_lock:
                    running = list(self._inflight.items())
                for token, ids in running:
                    self._extend(token, ids)
        finally:
            connections.close_all()

    def _extend(self, token: uuid.UUID, ids: list[int]) -> None:
        try:
            claims.extend(token, ids)
        except DatabaseError:
            logger.warning("could not extend the lease of %d deliveries", len(ids), exc_info=True)
            close_old_connections()

    def _relay_loop(self) -> None:
        """a full batch goes again at once; a short one waits the poll interval."""
        assert self.relay is not None
        failures = 0
        try:
            while not self._stop.is_set():
                try:
                    close_old_connections()
                    claimed = self.relay.run_once()
                    failures = 0
                except DatabaseError as exc:
                    failures += 1
                    self._back_off(exc, failures)
                    continue
                if claimed < int(bus_settings.RELAY_BATCH_SIZE):
                    self._relay_wakeup.wait(float(bus_settings.RELAY_POLL_INTERVAL_MS) / 1000)
                    self._relay_wakeup.clear()
        finally:
            connections.close_all()

    def _listen_loop(self) -> None:
        """LISTEN for wake-up hints; polling stays the fallback when this connection is down."""
        delay = 1.0
        while not self._stop.is_set():
            try:
                with psycopg.connect(conninfo(), autocommit=True) as conn:
                    conn.execute(f"LISTEN {WAKEUP_CHANNEL}")
                    delay = 1.0
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            self._wakeup.set()
                            self._relay_wakeup.set()
            except psycopg.Error as exc:
                logger.warning("LISTEN connection failed (%s); polling meanwhile", exc)
                self._stop.wait(delay)
                delay = min(MAX_DB_BACKOFF, delay * 2)

    # -- signals ----------------------------------------------------------------------------

    def _install_signal_handlers(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous: dict[int, Any] = {}
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, self._on_signal)
        return previous

    def _restore_signal_handlers(self, previous: dict[int, Any]) -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals_seen += 1
        if self._signals_seen > 1:
            os.write(2, b"second signal: exiting now\n")
            os._exit(1)
        logger.info("signal %s: finishing the current batch, then exiting", signum)
        self.request_stop()


def _select_consumers(names: Sequence[str] | None) -> list[Consumer]:
    if not names:
        return registry.running_on("drain")
    selected = [registry.get(name) for name in dict.fromkeys(names)]
    on_broker = [c.name for c in selected if c.runs_on == "broker"]
    if on_broker:
        raise ConsumerRegistrationError(
            f"consumer(s) {', '.join(on_broker)} run on the job broker (runs_on='broker'): the "
            "outbox relay publishes them and `manage.py rundramatiq` runs them"
        )
    return selected
