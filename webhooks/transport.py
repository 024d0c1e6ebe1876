"""The HTTP client for webhooks: httpx with pooling, timeouts, no redirects, no environment
proxies, and the SSRF guard at the connection layer.

`GuardedBackend` is an httpcore network backend: for every new connection it refuses a host
written in a form resolvers reinterpret (`127.1`, `0x7f.1`), resolves the host once, refuses if
ANY resolved address is forbidden (webhooks.ssrf), then connects to the vetted address itself.
The URL keeps the host name, so the Host header, TLS SNI and certificate checks are unchanged,
and a DNS answer that changes between the check and the connect (rebinding) never reaches the
socket.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Iterable
from typing import Any

import certifi
import httpcore
import httpx

from webhooks import ssrf
from webhooks.conf import webhook_settings

Resolver = Callable[[str, int], list[str]]


def system_resolver(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (A and AAAA), in resolver order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class GuardedBackend(httpcore.NetworkBackend):
    """Resolve, vet every address, connect to a vetted one (never re-resolving)."""

    def __init__(
        self,
        *,
        resolver: Resolver = system_resolver,
        backend: httpcore.NetworkBackend | None = None,
    ) -> None:
        self.resolver = resolver
        self.backend = backend or httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        ssrf.check_host(host)
        addresses = self._resolve(host, port)
        for address in addresses:
            ssrf.check_address(host, address)
        last_error: Exception | None = None
        for address in addresses:
            try:
                return self.backend.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except httpcore.ConnectError as exc:
                last_error = exc
        raise last_error or httpcore.ConnectError(f"no address to connect to for {host}")

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        raise ssrf.BlockedDestination("unix sockets are not webhook targets")

    def sleep(self, seconds: float) -> None:
        self.backend.sleep(seconds)

    def _resolve(self, host: str, port: int) -> list[str]:
        try:
            addresses = self.resolver(host, port)
        except (OSError, UnicodeError) as exc:  # the idna codec refuses labels DNS cannot carry
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        if not addresses:
            raise httpcore.ConnectError(f"{host} resolves to no address")
        return addresses


class GuardedTransport(httpx.HTTPTransport):
    """httpx's transport on a connection pool that uses GuardedBackend."""

    def __init__(self, *, backend: GuardedBackend, limits: httpx.Limits) -> None:
        super().__init__(trust_env=False, limits=limits)
        # httpx builds its pool without a way to pass a network backend: replace it.
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl.create_default_context(cafile=certifi.where()),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=backend,
        )


def timeouts() -> httpx.Timeout:
    """Connect quickly; the rest of the request shares the total budget (read at call time)."""
    total = webhook_settings.TIMEOUT
    connect = min(webhook_settings.CONNECT_TIMEOUT, total)
    return httpx.Timeout(total, connect=connect, pool=total)


def build_client(
    *, max_connections: int = 100, resolver: Resolver = system_resolver, **backend: Any
) -> httpx.Client:
    """A pooled client that never follows redirects nor reads proxies from the environment."""
    limits = httpx.Limits(
        max_connections=max_connections,
        max_keepalive_connections=max_connections,
        keepalive_expiry=30.0,
    )
    transport = GuardedTransport(
        backend=GuardedBackend(resolver=resolver, **backend), limits=limits
    )
    return httpx.Client(
        transport=transport, follow_redirects=False, trust_env=False, timeout=timeouts()
    )
