"""A guard for tests that must not leave the machine: loopback only.

While `loopback_only()` is active, a socket connection, datagram or name lookup for anything but
a loopback address or `localhost` raises `OffLoopback` (an OSError, so HTTP clients treat it as
a failed connection) before a byte goes out, in every thread (the live server's too), and is
recorded. It works through a Python audit hook (PEP 578), which sees `socket.connect`,
`socket.sendto` and `socket.getaddrinfo` whoever calls them; libpq's own connections (psycopg)
are C code and not seen, and always go to the test database. A hook cannot be removed, so one is
installed on first use and the guard switches it on and off.
"""

from __future__ import annotations

import ipaddress
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

LOOKUP_EVENTS = frozenset({"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex"})
ADDRESS_EVENTS = frozenset({"socket.connect", "socket.sendto"})


class OffLoopback(PermissionError):
    """A test tried to reach something that is not loopback."""


class _Guard:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.installed = False
        self.refused: list[str] | None = None  # where to record refusals; None: not guarding


_guard = _Guard()


@contextmanager
def loopback_only() -> Iterator[list[str]]:
    """Refuse non-loopback network access while active; yields the list of what was refused."""
    with _guard.lock:
        if not _guard.installed:
            sys.addaudithook(_audit)
            _guard.installed = True
        outer, refused = _guard.refused, []
        _guard.refused = refused
    try:
        yield refused
    finally:
        _guard.refused = outer


def is_loopback(host: Any) -> bool:
    """`localhost` (or a name under it), a loopback IP literal, or no host (a local socket)."""
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    name = str(host).rstrip(".").lower()
    if name in ("", "localhost") or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _guard is None:  # type: ignore[comparison-overlap]  # module globals cleared at shutdown
        return
    refused = _guard.refused
    if refused is None:
        return
    if event in LOOKUP_EVENTS:
        host = args[0]
    elif event in ADDRESS_EVENTS:
        address = args[1]
        host = address[0] if isinstance(address, tuple) else None  # a str is a Unix socket
    else:
        return
    if not is_loopback(host):
        refused.append(f"{event} {host!r}")
        raise OffLoopback(f"{event} {host!r}: tests use loopback only")
