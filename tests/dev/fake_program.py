"""A stand-in for a supervised program that records its pid and every stop signal it receives.

usage: fake_program.py NAME DIR [--ignore-stop] [--forward-to-child]

On start it appends its pid to DIR/NAME.pids (after its handlers are installed); every SIGTERM,
SIGINT or SIGHUP it receives is appended to DIR/NAME.signals. It exits 0 shortly after the first
one (lingering a moment so a duplicate signal would be recorded too), unless --ignore-stop.
With --forward-to-child it starts NAME-child (in its process group) and passes the first signal
on to it once, as dramatiq's main process does with its worker processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

LINGER_SECONDS = 0.3
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class FakeProgram:
    def __init__(self, name: str, directory: Path, *, ignore_stop: bool, forward: bool) -> None:
        self.name = name
        self.directory = directory
        self.ignore_stop = ignore_stop
        self.child: subprocess.Popen[bytes] | None = None
        if forward:
            self.child = subprocess.Popen(
                [sys.executable, __file__, f"{name}-child", str(directory)]
            )
        self.first_signal_at: float | None = None

    def append(self, suffix: str, line: str) -> None:
        with (self.directory / f"{self.name}.{suffix}").open("a") as handle:
            handle.write(line + "\n")

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.append("signals", signal.Signals(signum).name)
        if self.first_signal_at is None:
            self.first_signal_at = time.monotonic()
            if self.child is not None:
                self.child.send_signal(signum)

    def done(self) -> bool:
        if self.ignore_stop or self.first_signal_at is None:
            return False
        return time.monotonic() > self.first_signal_at + LINGER_SECONDS

    def run(self) -> int:
        for signum in STOP_SIGNALS:
            signal.signal(signum, self.on_signal)
        self.append("pids", str(os.getpid()))
        print(f"{self.name} ready", flush=True)
        while not self.done():
            time.sleep(0.02)
        if self.child is not None:
            self.child.wait()
        return 0


if __name__ == "__main__":
    name, directory, *flags = sys.argv[1:]
    program = FakeProgram(
        name,
        Path(directory),
        ignore_stop="--ignore-stop" in flags,
        forward="--forward-to-child" in flags,
    )
    sys.exit(program.run())
