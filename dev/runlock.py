"""One `python3 -m dev run` per checkout: a lock file held with flock for the run's lifetime."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from dev.console import DevError


@contextlib.contextmanager
def hold_run_lock(path: Path) -> Iterator[None]:
    """Hold path's lock (and our PID in it) or refuse, naming the PID of the run that holds it."""
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise refusal(path, holder_pid(handle)) from None
        write_pid(handle)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def write_pid(handle: IO[str]) -> None:
    """Replace the lock file's content with our PID (for the message a second run prints)."""
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()


def holder_pid(handle: IO[str]) -> str:
    """The PID the holder wrote, or 'unknown' while it has not written it yet."""
    handle.seek(0)
    return handle.read().strip() or "unknown"


def refusal(path: Path, pid: str) -> DevError:
    """The error a second run gets."""
    return DevError(
        f"`python3 -m dev run` is already running in this checkout (pid {pid}, holding {path}); "
        f"stop that one first (Ctrl-C in its terminal, or kill {pid})."
    )
