"""How the dev tooling talks to the human: progress lines on stderr, errors without tracebacks."""

from __future__ import annotations

import sys


class DevError(Exception):
    """A failure with a message meant for humans (printed without a traceback)."""


def say(message: str) -> None:
    """Print a progress line to stderr (stdout is reserved for command output)."""
    print(f"[dev] {message}", file=sys.stderr, flush=True)
