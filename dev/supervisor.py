"""Runs a table of long-lived programs side by side with prefixed output, honcho-style.

A program that exits on its own is restarted with back-off; the others keep running. Only a
SIGINT/SIGTERM/SIGHUP to the supervisor stops them all: each program gets its stop signal once,
then SIGKILL after the grace period (or at once on a second signal).
"""

from __future__ import annotations

import contextlib
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO

from dev.console import DevError, say
from dev.foreground import signal_handlers

DEFAULT_GRACE_SECONDS = 20.0
# Ceiling on one idle wait of the main loop, so a lost wake-up only delays it.
MAX_IDLE_WAIT = 1.0


@dataclass(frozen=True)
class Program:
    """One supervised program: its argv, what it is for, the signal it stops gracefully on."""

    argv: list[str]
    description: str
    stop_signal: signal.Signals = signal.SIGTERM


@dataclass(frozen=True)
class Backoff:
    """Restart delays: `first`, doubling up to `cap`; `first` again after a run of `reset_after`."""

    first: float = 1.0
    cap: float = 30.0
    reset_after: float = 60.0

    def next_delay(self, previous: float | None, uptime: float) -> float:
        """The delay before the next restart, given the previous delay and how long it ran."""
        if previous is None or uptime >= self.reset_after:
            return self.first
        return min(self.cap, previous * 2)


@dataclass(frozen=True)
class Exited:
    """A program's process ended (posted by its watcher thread)."""

    name: str
    proc: subprocess.Popen[bytes]
    returncode: int


@dataclass(frozen=True)
class Signalled:
    """The supervisor received a stop signal (posted by the signal handler)."""

    signum: int


LoopEvent = Exited | Signalled


@dataclass
class Child:
    """A program's current process (None while it waits for a restart) and its back-off."""

    program: Program
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    delay: float | None = None
    restart_at: float | None = None


def describe_exit(returncode: int) -> str:
    """'exited with code 1' or 'was killed by SIGKILL'."""
    if returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with code {returncode}"


class Supervisor:
    """Starts every program, restarts the ones that exit, stops all on a signal to itself."""

    def __init__(
        self,
        programs: Mapping[str, Program],
        *,
        env: Mapping[str, str],
        cwd: Path,
        grace_seconds: float = DEFAULT_GRACE_SECONDS,
        backoff: Backoff | None = None,
    ) -> None:
        self.children = {name: Child(program) for name, program in programs.items()}
        self.env = dict(env)
        self.cwd = cwd
        self.grace_seconds = grace_seconds
        self.backoff = backoff or Backoff()
        self.width = max(len(name) for name in programs)
        # SimpleQueue: put() may be called from a signal handler.
        self.events: queue.SimpleQueue[LoopEvent] = queue.SimpleQueue()
        self.output_lock = threading.Lock()
        self.readers: list[threading.Thread] = []

    def run(self) -> int:
        """Supervise until a stop signal; 0 when every program then stopped within the grace."""
        with signal_handlers(self.on_signal):
            try:
                for name in self.children:
                    self.start(name)
                signum = self.supervise()
                say(f"{signal.Signals(signum).name} received: stopping all processes ...")
            finally:
                graceful = self.stop_all()
        return 0 if graceful else 1

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        """Hand the signal to the main loop."""
        self.events.put(Signalled(signum))

    # -- running ------------------------------------------------------------------------------

    def supervise(self) -> int:
        """Restart programs that exit until a stop signal arrives; return that signal."""
        while True:
            event = self.next_event(self.idle_wait())
            if isinstance(event, Signalled):
                return event.signum
            if event is not None:
                self.schedule_restart(event)
            self.start_due_restarts()

    def next_event(self, timeout: float) -> LoopEvent | None:
        """The next event, or None after timeout seconds."""
        try:
            return self.events.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None

    def idle_wait(self) -> float:
        """Seconds until the earliest pending restart (at most MAX_IDLE_WAIT)."""
        due = [child.restart_at for child in self.children.values() if child.restart_at is not None]
        return min([MAX_IDLE_WAIT, *(at - time.monotonic() for at in due)])

    def schedule_restart(self, event: Exited) -> None:
        """A program exited on its own: restart it after its back-off delay."""
        child = self.current(event)
        if child is None:
            return
        uptime = time.monotonic() - child.started_at
        child.delay = self.backoff.next_delay(child.delay, uptime)
        child.restart_at = time.monotonic() + child.delay
        say(f"{event.name} {describe_exit(event.returncode)}; restarting in {child.delay:g} s")

    def start_due_restarts(self) -> None:
        """Start the programs whose back-off delay is over."""
        now = time.monotonic()
        for name, child in self.children.items():
            if child.restart_at is not None and child.restart_at <= now:
                self.start(name)

    def current(self, event: Exited) -> Child | None:
        """The child whose current process the event is about (clearing it), else None."""
        child = self.children[event.name]
        if child.proc is not event.proc:
            return None
        child.proc = None
        return child

    def start(self, name: str) -> None:
        """Start a program in its own session, with threads for its output and its exit."""
        child = self.children[name]
        child.restart_at = None
        try:
            proc = subprocess.Popen(
                child.program.argv,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                # Its own process group: a Ctrl-C in the terminal reaches only the supervisor.
                start_new_session=True,
            )
        except OSError as exc:
            raise DevError(f"cannot start {name}: {exc}") from exc
        child.proc, child.started_at = proc, time.monotonic()
        self.watch(name, proc)
        say(f"{name} started (pid {proc.pid}): {shlex.join(child.program.argv)}")

    def watch(self, name: str, proc: subprocess.Popen[bytes]) -> None:
        """Threads copying the process's output and posting its exit."""
        assert proc.stdout is not None
        reader = threading.Thread(target=self.pump, args=(name, proc.stdout), daemon=True)
        waiter = threading.Thread(target=self.wait_for, args=(name, proc), daemon=True)
        reader.start()
        waiter.start()
        self.readers = [thread for thread in self.readers if thread.is_alive()] + [reader]

    def wait_for(self, name: str, proc: subprocess.Popen[bytes]) -> None:
        """Post the process's exit to the main loop."""
        self.events.put(Exited(name, proc, proc.wait()))

    def pump(self, name: str, stream: IO[bytes]) -> None:
        """Copy a process's output line by line, prefixed with the time and its name."""
        for line in iter(stream.readline, b""):
            prefix = f"{time.strftime('%H:%M:%S')} {name.ljust(self.width)} | ".encode()
            with self.output_lock:
                sys.stdout.buffer.write(prefix + line.rstrip(b"\r\n") + b"\n")
                sys.stdout.buffer.flush()
        stream.close()

    # -- stopping -----------------------------------------------------------------------------

    def running(self) -> dict[str, subprocess.Popen[bytes]]:
        """The programs that have a process."""
        return {name: child.proc for name, child in self.children.items() if child.proc}

    def stop_all(self) -> bool:
        """Stop signal once to each process, SIGKILL after the grace; False if any was killed."""
        for child in self.children.values():
            child.restart_at = None
        self.send_stop_signals()
        graceful = self.wait_until_stopped(time.monotonic() + self.grace_seconds)
        if not graceful:
            self.kill_remaining()
        for reader in self.readers:
            reader.join(1.0)
        return graceful

    def send_stop_signals(self) -> None:
        """Each program's stop signal, once, to its own process only (not its group).

        Programs forward it to their own children: dramatiq's main process sends each of its
        worker processes one SIGTERM, and a worker that gets a second one kills its running jobs.
        """
        running = self.running()
        for name, proc in running.items():
            proc.send_signal(self.children[name].program.stop_signal)
        if running:
            say(
                f"waiting up to {self.grace_seconds:g} s for {', '.join(running)} to exit "
                "(Ctrl-C again to kill them now)"
            )

    def wait_until_stopped(self, deadline: float) -> bool:
        """Collect exits until none is left (True), the deadline passes or a signal comes."""
        while self.running():
            event = self.next_event(deadline - time.monotonic())
            if isinstance(event, Exited) and self.current(event):
                say(f"{event.name} stopped ({describe_exit(event.returncode)})")
            elif isinstance(event, Signalled):
                say(f"{signal.Signals(event.signum).name} again: killing what is left")
                return False
            elif time.monotonic() >= deadline:
                say(f"still running after {self.grace_seconds:g} s: {', '.join(self.running())}")
                return False
        return True

    def kill_remaining(self) -> None:
        """SIGKILL the process group of every program still running and wait for them."""
        for name, proc in self.running().items():
            say(f"sending SIGKILL to {name} (pid {proc.pid}) and its process group")
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        while self.running():
            event = self.next_event(MAX_IDLE_WAIT)
            if isinstance(event, Exited):
                self.current(event)
