"""Running one command in the foreground: signals routed, exit codes shell-style."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

SignalHandler = Callable[[int, FrameType | None], None]
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def signal_handlers(handler: SignalHandler) -> Iterator[None]:
    """Temporarily route SIGINT/SIGTERM/SIGHUP to handler."""
    previous = {signum: signal.signal(signum, handler) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def exit_code(returncode: int) -> int:
    """Shell-style exit code for a child's return code (-N -> 128+N)."""
    return 128 - returncode if returncode < 0 else returncode


def run_foreground(argv: list[str], env: dict[str, str], cwd: Path) -> int:
    """Run a child in the foreground; the caller survives Ctrl-C and forwards SIGTERM/SIGHUP."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env)

    def forward(signum: int, _frame: FrameType | None) -> None:
        # Ctrl-C already reaches the child through the terminal's process group.
        if signum != signal.SIGINT:
            proc.send_signal(signum)

    with signal_handlers(forward):
        return exit_code(proc.wait())
