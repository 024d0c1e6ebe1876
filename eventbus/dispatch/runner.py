"""The runner: what every long-running bus process needs once, around the pumps it drives.

A pump does one kind of work (the drain, the outbox relay, the webhook sender) behind a small
interface, `Pump`: `step()` settles what finished and claims more without blocking, `idle()`,
`wait_hint()`, `poke()` / `interrupted()` / `quiet()` / `stop()` as things happen, `close()`
finishes. A pump that keeps claimed deliveries while threads run them (the drain and the webhook
sender, both `eventbus.dispatch.slotted.SlottedPump`) is also a `LeaseHolder`: `held()` lists the
leases it holds, `lost()` is told which of them were taken over, and it counts what is `in_flight`.
The relay keeps nothing between passes and is a plain `Pump`. The runner owns the rest, once
for all of them:

- signals: first SIGTERM/SIGINT stops claiming, running work finishes (each within its timeout),
  unstarted work is released, exit 0; a second signal exits at once (leases then expire);
- the loop: step again at once while there was progress, otherwise wait, interruptibly, for a
  wake-up (LISTEN/NOTIFY, a finished handler, a stop) or the pump's own hint;
- heartbeats: every third of the lease, extend what each lease holder holds; rows no longer
  ours (the worker stalled past its lease and was taken over) are reported to the pump, which
  starts none of them and drops their results. The same thread, on the same connection, beats
  the worker registry (core.workers) every WORKERS["HEARTBEAT_SECONDS"], and brings back what
  an operator asked of the process from the console: quiet (every pump claims nothing more;
  what it holds still runs and settles) or stop (exactly as the first SIGTERM), acted on by
  the loop;
- reaping: every idle pass (at most once a second) and every few seconds while busy, so a
  killed worker's claim is back within the lease plus a few seconds;
- database back-off: a failed step tells every pump to start nothing more, then retries with
  a capped exponential delay; the pumps settle what they kept once the database is back.
"""

from __future__ import annotations

import gc
import logging
import os
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any, Protocol, runtime_checkable

import psycopg
from django.db import DatabaseError, close_old_connections, connection, connections

from core.db import conninfo
from core.workers import Presence, Sample, on_this_threads_connection
from eventbus.dispatch import breaker, settle
from eventbus.dispatch import claim as claims
from eventbus.store.conf import bus_settings
from eventbus.store.emitter import WAKEUP_CHANNEL

logger = logging.getLogger(__name__)

MAX_DB_BACKOFF = 30.0
IDLE_REAP_INTERVAL = 1.0  # reap at most this often while idle
BUSY_REAP_INTERVAL = 5.0  # ...and this often while busy (or a sixth of a shorter lease)
EXIT_DEGRADED = 75  # EX_TEMPFAIL: too many abandoned handler threads, start a fresh process
# Woken by a finished handler: wait up to this long for others to finish too, so one settle (one
# ack statement) serves several deliveries at a bounded cost in latency. A pump's own signals
# (half a batch finished, its queue low or empty) end the wait early.
GATHER_SECONDS = 0.02


def freeze_startup_heap() -> None:
    """Put what the process allocated while starting (Django, the apps, the registries) out of
    the garbage collector's reach. A worker then allocates a few short-lived objects per
    delivery, and every full collection would otherwise walk that whole start-up heap again:
    about a sixth of a no-op drain's CPU. Call it once, right before the runner starts. (No
    collection first: it would cost ~80 ms to free a few dozen objects.)"""
    gc.freeze()


class Pump(Protocol):
    """One kind of work the runner drives: what the loop asks of every pump (see the module
    docstring). A pump that keeps claimed deliveries between passes is a `LeaseHolder` too."""

    name: str
    processed: int
    concurrency: int  # what it runs at once (the console's workers page shows each, and the sum)

    def step(self) -> int: ...  # settle, claim; never blocks; returns the progress made
    def idle(self) -> bool: ...  # nothing due, nothing in flight (`--once` may exit)
    def wait_hint(self, poll_interval: float) -> float: ...  # how long an idle wait may last
    def poke(self) -> None: ...  # a NOTIFY arrived (the runner steps at once)
    def interrupted(self) -> None: ...  # a step failed on the database: start nothing more
    def quiet(self) -> None: ...  # claim nothing more; what is held still runs and settles
    def stop(self) -> None: ...  # claim nothing more: the process is stopping
    def close(self) -> None: ...  # finish: what runs ends, the rest is released, all settled


@runtime_checkable
class LeaseHolder(Protocol):
    """Optional, beside `Pump`: a pump that keeps claimed deliveries while its slot threads run
    them (the drain, the webhook sender; not the relay, which keeps nothing after publishing).
    The heartbeat extends what it `held()` under its `settling` lock and tells it `renewed()` /
    `lost()`; the runner counts its `in_flight` (the worker registry, the reaping interval),
    waits a little for more results while it is `gathering`, and exits with EXIT_DEGRADED when
    it is `degraded` (too many abandoned threads)."""

    name: str  # the pump's
    settling: threading.Lock  # held while settling: the heartbeat never races a settle

    def held(self) -> dict[uuid.UUID, list[int]]: ...
    def renewed(self, token: uuid.UUID) -> None: ...
    def lost(self, token: uuid.UUID, ids: set[int]) -> None: ...

    @property
    def in_flight(self) -> int: ...

    @property
    def gathering(self) -> bool: ...  # woken by a finished run: worth waiting for a few more

    @property
    def degraded(self) -> bool: ...


@dataclass
class RunnerOptions:
    poll_interval: float = 1.0
    once: bool = False  # stop when every pump is idle
    max_events: int | None = None  # stop after this many deliveries processed
    listen: bool = True
    startup_jitter: float = 0.25
    # In the worker registry (core.workers). Off for a pass run inside another process (the
    # process-pending-webhooks job, in the jobs process, which is registered already).
    presence: bool = True

    @classmethod
    def of(cls, options: Any) -> RunnerOptions:
        """The loop options of a command's options (drain_events, deliver_webhooks)."""
        return cls(
            poll_interval=options.poll_interval,
            once=options.once,
            max_events=options.max_events,
            listen=options.listen,
            startup_jitter=options.startup_jitter,
            presence=options.presence,
        )


class Runner:
    """`run()` drives the pumps until stopped; returns the exit code."""

    def __init__(
        self,
        pumps: Sequence[Pump],
        options: RunnerOptions,
        *,
        worker_id: str,
        wake: threading.Event,
        kind: str = "",
    ) -> None:
        self.pumps = list(pumps)
        self.holders: list[LeaseHolder] = [p for p in self.pumps if isinstance(p, LeaseHolder)]
        self.kind = kind or "+".join(p.name for p in self.pumps)
        self.options = options
        self.worker_id = worker_id
        self.wake = wake
        self._stop = threading.Event()
        self._signals_seen = 0
        self._next_reap = 0.0
        self._asked = ""  # set by the heartbeat thread: "quiet" or "stop", from the console
        self._quiet = False
        self.exit_code = 0

    @property
    def processed(self) -> int:
        return sum(p.processed for p in self.pumps)

    def request_stop(self) -> None:
        """Stop claiming; running work finishes, unstarted work is released."""
        self._stop.set()
        for pump in self.pumps:
            pump.stop()
        self.wake.set()

    def run(self) -> int:
        previous = self._install_signal_handlers()
        presence = self._presence() if self.options.presence else None
        threads = [self._start(lambda: self._heartbeat_loop(presence), "eventbus-heartbeat")]
        if self.options.listen:
            threads.append(self._start(self._listen_loop, "eventbus-listen"))
        logger.info("worker %s started: %s", self.worker_id, ", ".join(p.name for p in self.pumps))
        try:
            self._stop.wait(random.uniform(0, self.options.startup_jitter))
            self._loop()
        finally:
            self._stop.set()
            self._close_pumps()
            self._flush_breaker_tally()
            for thread in threads:
                thread.join(timeout=5)
            if presence is not None:
                presence.stop()
            self._restore_signal_handlers(previous)
            connections.close_all()
        logger.info("worker %s stopped after %d deliveries", self.worker_id, self.processed)
        return self.exit_code

    def _presence(self) -> Presence:
        """This process in the worker registry (core/workers.py), beaten by the heartbeat
        thread on its connection."""
        return Presence(
            kind=self.kind,
            concurrency=sum(p.concurrency for p in self.pumps),
            pumps=", ".join(p.name for p in self.pumps),
            threads={p.name: p.concurrency for p in self.pumps},
            sample=self._sample,
            execute=on_this_threads_connection,
            on_command=self._on_command,
        )

    def _sample(self) -> Sample:
        in_flight = sum(p.in_flight for p in self.holders)
        mode = "quiet" if self._quiet else "running"
        return Sample(in_flight=in_flight, last_claim_at=claims.last_claim_at(), mode=mode)

    def _on_command(self, command: str) -> None:
        """The heartbeat thread brought back a command: the loop acts on it (`_obey`)."""
        self._asked = command
        self.wake.set()

    def _obey(self) -> None:
        """Act on what the console asked: quiet once, or stop as on the first SIGTERM."""
        if self._asked == "stop":
            logger.info("worker %s: asked to stop; finishing the running work", self.worker_id)
            self.request_stop()
        elif self._asked == "quiet" and not self._quiet:
            logger.info("worker %s: asked to be quiet; claiming nothing more", self.worker_id)
            self._quiet = True
            for pump in self.pumps:
                pump.quiet()

    def step(self) -> int:
        """One pass over the pumps (reaping first when due); returns their progress."""
        self._maybe_reap()
        progress = sum(pump.step() for pump in self.pumps)
        breaker.flush()  # the settled outcomes' tally, about once a second
        return progress

    # -- the loop -----------------------------------------------------------------------------

    def _loop(self) -> None:
        failures = 0
        while not self._stop.is_set():
            self._obey()
            if self._stop.is_set():
                return
            try:
                close_old_connections()
                progress = self.step()
                failures = 0
            except DatabaseError as exc:
                failures += 1
                for pump in self.pumps:
                    pump.interrupted()
                self._back_off(exc, failures)
                continue
            if self._finished() or self._degraded():
                return
            if progress == 0:
                self._idle_wait()

    def _finished(self) -> bool:
        limit = self.options.max_events
        if limit is not None and self.processed >= limit:
            return True
        return self.options.once and all(pump.idle() for pump in self.pumps)

    def _degraded(self) -> bool:
        sick = [pump.name for pump in self.holders if pump.degraded]
        if sick:
            logger.critical(
                "worker %s: too many abandoned handler threads in %s (timed-out handlers that "
                "never returned); exiting with code %d so a fresh process takes over",
                self.worker_id,
                ", ".join(sick),
                EXIT_DEGRADED,
            )
            self.exit_code = EXIT_DEGRADED
        return bool(sick)

    def _idle_wait(self) -> None:
        poll = self.options.poll_interval
        self.wake.wait(min(pump.wait_hint(poll) for pump in self.pumps))
        self.wake.clear()
        if any(pump.in_flight and pump.gathering for pump in self.holders):
            self.wake.wait(GATHER_SECONDS)
            self.wake.clear()

    def _back_off(self, exc: Exception, failures: int) -> None:
        delay = min(MAX_DB_BACKOFF, 0.5 * 2 ** (failures - 1)) * random.uniform(0.8, 1.2)
        logger.warning(
            "database error (%s: %s); reconnecting in %.1fs (failure %d)",
            type(exc).__name__,
            str(exc).strip(),
            delay,
            failures,
        )
        try:
            connection.close()
        except DatabaseError:
            logger.debug("closing the broken connection failed", exc_info=True)
        self._stop.wait(delay)

    def _maybe_reap(self) -> None:
        now = time.monotonic()
        if now < self._next_reap:
            return
        busy = any(pump.in_flight for pump in self.holders)
        lease = bus_settings.LEASE_SECONDS
        interval = min(BUSY_REAP_INTERVAL, lease / 6) if busy else IDLE_REAP_INTERVAL
        self._next_reap = now + interval
        settle.reap(worker_id=self.worker_id)  # alerts on deaths itself

    def _flush_breaker_tally(self) -> None:
        try:
            breaker.flush(force=True)  # what was settled since the last flush
        except DatabaseError:
            logger.warning("could not write the circuit breaker's last counts", exc_info=True)

    def _close_pumps(self) -> None:
        for pump in self.pumps:
            pump.stop()
        for pump in self.pumps:
            try:
                pump.close()
            except DatabaseError:
                logger.error(
                    "%s: could not settle its last results before exit; their leases will "
                    "expire and the reaper takes them over",
                    pump.name,
                )

    # -- background threads -------------------------------------------------------------------

    def _start(self, target: Callable[[], None], name: str) -> threading.Thread:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        return thread

    def _heartbeat_loop(self, presence: Presence | None) -> None:
        """Extend every pump's leases every third of the lease, and beat the worker registry
        (registering first), each when due, on this thread's one connection."""
        now = time.monotonic()
        leases_due = now + bus_settings.LEASE_SECONDS / 3
        presence_due = now if presence is not None else float("inf")
        try:
            while not self._stop.wait(max(0.0, min(leases_due, presence_due) - time.monotonic())):
                now = time.monotonic()
                if presence is not None and now >= presence_due:
                    presence.tick()
                    presence_due = now + presence.interval()
                if now >= leases_due:
                    for holder in self.holders:
                        self._beat(holder)
                    leases_due = now + bus_settings.LEASE_SECONDS / 3
        finally:
            connections.close_all()

    def _beat(self, holder: LeaseHolder) -> None:
        try:
            with holder.settling:
                for token, ids in holder.held().items():
                    lost = set(ids) - claims.extend(token, ids)
                    holder.renewed(token)
                    if lost:
                        holder.lost(token, lost)
        except DatabaseError:
            logger.warning("%s: could not extend its leases", holder.name, exc_info=True)
            close_old_connections()

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
                            for pump in self.pumps:
                                pump.poke()
                            self.wake.set()
            except psycopg.Error as exc:
                logger.warning("LISTEN connection failed (%s); polling meanwhile", exc)
                self._stop.wait(delay)
                delay = min(MAX_DB_BACKOFF, delay * 2)

    # -- signals ------------------------------------------------------------------------------

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
        logger.info("signal %s: finishing the running work, then exiting", signum)
        self.request_stop()
