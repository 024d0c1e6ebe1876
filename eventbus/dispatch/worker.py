"""`drain_events`' worker: the runner driving the drain pump and, optionally, the relay pump.

The drain pump runs the consumers declared `runs_on="drain"`; consumers declared
`runs_on="broker"` are not run here: the outbox relay pump (`OUTBOX_RELAY_ENABLED`) publishes
their deliveries to the job broker instead. Signals, LISTEN, heartbeats, reaping and database
back-off are the runner's (eventbus/dispatch/runner.py); what makes a failed handler cost only
itself is the pump's and the claim's (eventbus/dispatch/drain.py, eventbus/dispatch/claim.py).
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from eventbus.dispatch import breaker, settle
from eventbus.dispatch.drain import DrainPump
from eventbus.dispatch.relay import Relay
from eventbus.dispatch.runner import Pump, Runner, RunnerOptions
from eventbus.store.conf import bus_settings
from eventbus.store.errors import ConsumerRegistrationError
from eventbus.store.registry import Consumer, registry


@dataclass
class WorkerOptions:
    consumers: Sequence[str] | None = None  # None: every registered consumer
    batch_size: int = 100
    poll_interval: float = 1.0
    concurrency: int | None = 1  # handler threads; None: one, growing while they wait on I/O
    once: bool = False  # drain what is due, then exit
    max_events: int | None = None  # exit after processing this many deliveries
    listen: bool = True
    startup_jitter: float = 0.25
    drain: bool = True  # run the drain consumers (WORKER_ENABLED)
    relay: bool = False  # also publish broker-run deliveries (OUTBOX_RELAY_ENABLED)
    presence: bool = True  # in the worker registry (off for a pass run inside another process)


def worker_id() -> str:
    """This process as operators see it in `locked_by`: host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Worker:
    """`run()` until stopped; `run_once()` claims, runs and settles one batch; `request_stop()`."""

    def __init__(self, options: WorkerOptions | None = None) -> None:
        self.options = options = options or WorkerOptions()
        self.consumers = _select_consumers(options.consumers) if options.drain else []
        self.names = [c.name for c in self.consumers]
        self.worker_id = worker_id()
        wake = threading.Event()
        self.drain = DrainPump(
            self.consumers,
            worker_id=self.worker_id,
            concurrency=options.concurrency,
            batch_size=options.batch_size,
            max_events=options.max_events,
            wake=wake.set,
        )
        self.relay = Relay(worker_id=self.worker_id) if options.relay else None
        pumps: list[Pump] = [self.drain]
        if self.relay is not None and self.relay.names:
            pumps.append(self.relay)
        self.runner = Runner(
            pumps,
            RunnerOptions.of(options),
            worker_id=self.worker_id,
            wake=wake,
            kind="drain_events",
        )

    @property
    def processed(self) -> int:
        return self.drain.processed

    def request_stop(self) -> None:
        self.runner.request_stop()

    def run(self) -> int:
        """Work until stopped (or `once`/`max_events` says so). Returns the exit code."""
        return self.runner.run()

    def run_once(self) -> int:
        """Reap, then claim one batch, run it, settle it. Returns how many were claimed."""
        settle.reap(worker_id=self.worker_id)
        claimed = self.drain.run_batch()
        breaker.flush()  # when due (the runner's loop does it otherwise)
        return claimed

    def close(self) -> None:
        """Stop the handler threads (after `run_once` calls; `run` does it itself)."""
        self.drain.close()

    def relay_due(self) -> int:
        """Publish every due broker-run delivery (one relay batch after another)."""
        published = 0
        batch_size = bus_settings.RELAY_BATCH_SIZE
        while self.relay is not None:
            claimed = self.relay.run_once()
            published += claimed
            if claimed < batch_size:
                break
        return published


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
