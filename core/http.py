"""Outbound HTTP with SSRF protection: the one client for every request Deskcomm makes to a URL
it does not control (webhooks, the DLQ alert, every integration).

`guarded_client()` is httpx on a connection pool whose network backend (`GuardedBackend`)
refuses a host written in a form resolvers reinterpret (`127.1`, `0x7f.1`), resolves the host
once, refuses if ANY address it resolves to is forbidden (`refusal_reason`: private and loopback
only while the caller's development switch is on), then connects to the vetted address itself.
The URL keeps the host name, so the Host header, TLS SNI and certificate checks are unchanged,
and a DNS answer that changes between the check and the connect (rebinding) never reaches the
socket. Redirects are never followed, proxies from the environment are ignored, timeouts are
short. A refusal is a `BlockedDestination`: nothing was sent.

`parse_url()` judges a URL with httpx's own parser (the one that sends it) and refuses what that
parser accepts but no outbound request should carry: non-canonical IPv4 forms (`0177.0.0.1`,
`0x7f.1`, `2130706433`, `127.1`) that resolvers quietly turn into another address, credentials,
fragments, control characters, out-of-range ports, names DNS cannot carry.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import ipaddress
import math
import re
import socket
import ssl
from collections.abc import Callable, Iterable
from typing import Any

import certifi
import httpcore
import httpx
from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# (host, port) -> every address the host resolves to, as strings; tests pass their own.
Resolver = Callable[[str, int], list[str]]

ALLOWED_SCHEMES = ("http", "https")
CONNECT_TIMEOUT = 3.0
# Idle pooled connections are kept this long: webhook bursts reuse them, a quiet endpoint's close.
KEEPALIVE_SECONDS = 30.0
# The development switch of generic callers; named in their refusals.
OUTBOUND_SWITCH = "OUTBOUND_HTTP_ALLOW_PRIVATE"
# Cloud instance metadata endpoints (AWS, ECS, Alibaba, AWS IPv6): never reachable, not even
# with private targets allowed.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254")
)
CGNAT = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT: internal, not private
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # IPv6 addresses that carry an IPv4 one


# scheme "://" authority: the authority as written, before httpx normalises it.
AUTHORITY = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(?P<authority>[^/?#]*)")
# A host label that ends in a number makes resolvers read the whole host as an IPv4 address
# (inet_aton: octal, hex, 1 to 4 parts), the WHATWG URL standard's "ends in a number" rule.
NUMERIC_LABEL = re.compile(r"0x[0-9a-f]*|[0-9]+")
DNS_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
MAX_DNS_NAME = 253


class BlockedDestination(httpx.ConnectError):
    """A destination (or URL) the SSRF guard refuses; nothing was sent.

    An httpx.ConnectError, so callers that catch httpx.HTTPError catch it too. The class name is
    stored with webhook attempts, and webhooks.outcome reads it as permanent: keep it.
    """


def system_resolver(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (A and AAAA), in resolver order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def guarded_client(
    *,
    timeout: float | httpx.Timeout | None = None,
    allow_private: bool | None = None,
    allow_private_setting: str = OUTBOUND_SWITCH,
    max_connections: int = 100,
    resolver: Resolver = system_resolver,
    backend: httpcore.NetworkBackend | None = None,
) -> httpx.Client:
    """A pooled httpx client for untrusted URLs: vetted addresses, no redirects, no env proxies.

    `timeout`: seconds (connect at most 3 s) or an httpx.Timeout used as is; default
    OUTBOUND_HTTP_TIMEOUT. `allow_private`: default OUTBOUND_HTTP_ALLOW_PRIVATE. Both are read
    now, not at import. `allow_private_setting` is the switch refusals tell the operator about
    (callers with their own switch pass both). `resolver` and `backend` (the socket layer under
    the guard) are for tests.
    """
    guard = GuardedBackend(
        allow_private=_allow_private(allow_private),
        allow_private_setting=allow_private_setting,
        resolver=resolver,
        backend=backend,
    )
    return GuardedClient(
        transport=GuardedTransport(backend=guard, max_connections=max_connections),
        timeout=_timeout(timeout),
        follow_redirects=False,
        trust_env=False,
    )


def _allow_private(allow_private: bool | None) -> bool:
    if allow_private is None:
        return bool(settings.OUTBOUND_HTTP_ALLOW_PRIVATE)
    return allow_private


def _timeout(timeout: float | httpx.Timeout | None) -> httpx.Timeout:
    if isinstance(timeout, httpx.Timeout):
        return timeout
    total = float(settings.OUTBOUND_HTTP_TIMEOUT if timeout is None else timeout)
    return httpx.Timeout(total, connect=min(total, CONNECT_TIMEOUT))


class GuardedClient(httpx.Client):
    """Parses URL strings with `parse_url`, so an unsendable one is a BlockedDestination.

    httpx would raise `InvalidURL` (not an `httpx.HTTPError`) for some, and quietly send others
    differently from how they read; callers catch `httpx.HTTPError` for every failure.
    """

    def build_request(self, method: str, url: httpx.URL | str, **kwargs: Any) -> httpx.Request:
        if isinstance(url, str):
            try:
                url = parse_url(url)
            except UnsendableURL as exc:
                raise BlockedDestination(str(exc)) from None
        return super().build_request(method, url, **kwargs)


class GuardedTransport(httpx.HTTPTransport):
    """httpx's transport on a connection pool whose network backend is the guard."""

    def __init__(self, *, backend: GuardedBackend, max_connections: int) -> None:
        super().__init__(trust_env=False)
        # httpx builds its pool without a way to pass a network backend: replace it.
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl.create_default_context(cafile=certifi.where()),
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=KEEPALIVE_SECONDS,
            network_backend=backend,
        )


class GuardedBackend(httpcore.NetworkBackend):
    """Vet the host and every address it resolves to; connect to a vetted one (no re-resolving)."""

    def __init__(
        self,
        *,
        allow_private: bool,
        allow_private_setting: str,
        resolver: Resolver,
        backend: httpcore.NetworkBackend | None = None,
    ) -> None:
        self.allow_private = allow_private
        self.allow_private_setting = allow_private_setting
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
        last_error: Exception | None = None
        for address in self.vetted_addresses(host, port):
            try:
                return self.backend.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except httpcore.ConnectError as exc:
                last_error = exc
        raise last_error or httpcore.ConnectError(f"no address to connect to for {host}")

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        raise BlockedDestination("unix sockets are not outbound targets")

    def sleep(self, seconds: float) -> None:
        self.backend.sleep(seconds)

    def vetted_addresses(self, host: str, port: int) -> list[str]:
        """Every address `host` resolves to, or BlockedDestination if the host or any is refused."""
        problem = host_problem(host)
        if problem:
            raise BlockedDestination(f"refused to connect to {host}: url {problem}")
        addresses = self._resolve(host, port)
        # Every answer must pass: a name resolving to one public and one private address is refused.
        for address in addresses:
            why = refusal_with_hint(
                ipaddress.ip_address(address),
                allow_private=self.allow_private,
                setting=self.allow_private_setting,
            )
            if why:
                raise BlockedDestination(f"refused to connect to {host} ({address}): {why}")
        return addresses

    def _resolve(self, host: str, port: int) -> list[str]:
        try:
            addresses = self.resolver(host, port)
        except (OSError, UnicodeError) as exc:  # the idna codec refuses labels DNS cannot carry
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        if not addresses:
            raise httpcore.ConnectError(f"cannot resolve {host}: no address")
        return addresses


class UnsendableURL(ValueError):
    """A URL the outbound clients will not send as written; the message says what is wrong."""


def parse_url(text: str) -> httpx.URL:
    """`text` as httpx parses it for sending, or UnsendableURL naming what is wrong with it."""
    problem = _text_problem(text)
    if not problem:
        try:
            url = httpx.URL(text)
        except (httpx.InvalidURL, ValueError) as exc:  # IDNA errors are ValueErrors
            problem = f"cannot be parsed: {exc}"
        else:
            problem = url_problem(url)
    if problem:
        raise UnsendableURL(f"url {problem}")
    return url


def url_problem(url: httpx.URL) -> str:
    """What makes a parsed URL unsendable ("" when nothing): scheme, credentials, host, port."""
    if url.scheme not in ALLOWED_SCHEMES:
        return f"must use http or https, not the scheme {url.scheme!r}"
    if url.userinfo:
        return "must not contain credentials (user:password@)"
    if not url.raw_host:
        return "has no host"
    try:
        url.host  # noqa: B018  (decodes IDNA labels: raises for invalid punycode)
    except ValueError as exc:
        return f"host {url.raw_host.decode('ascii')!r} is not valid IDNA: {exc}"
    if url.port is not None and not 0 < url.port < 65536:
        return f"is not valid: port {url.port} is outside 1-65535"
    return host_problem(url.raw_host.decode("ascii"))


def host_problem(host: str) -> str:
    """Why `host` (as httpx sends it: lower case, IDNA-encoded) is refused ("" when it is not)."""
    if ":" in host:
        return "has an IPv6 zone identifier (%), which is not allowed" if "%" in host else ""
    labels = host.split(".")
    if NUMERIC_LABEL.fullmatch(labels[-1]):
        return _ipv4_problem(host)
    if len(host) > MAX_DNS_NAME:
        return f"host is longer than {MAX_DNS_NAME} characters"
    for label in labels:
        if not DNS_LABEL.fullmatch(label):
            return f"host {host!r} is not a valid DNS name (label {label!r})"
    return ""


def _ipv4_problem(host: str) -> str:
    try:
        canonical = str(ipaddress.IPv4Address(host)) == host
    except ValueError:
        canonical = False
    if canonical:
        return ""
    return (
        f"host {host!r} is not a canonical IPv4 address: write four decimal numbers without "
        "leading zeros (like 192.0.2.10); octal, hex, integer and shortened forms are refused"
    )


def _text_problem(text: object) -> str:
    """What the written URL has that httpx would quietly drop, fix or reinterpret."""
    if not isinstance(text, str):
        return "is not a string"
    for position, char in enumerate(text):
        if char.isspace() or not char.isprintable():
            return f"has a control or space character at position {position} (percent-encode it)"
    if "#" in text:
        return "has a fragment (#...), which is never sent"
    written = AUTHORITY.match(text)
    if written is None:
        return "must be absolute: scheme://host/path"
    authority = written["authority"]
    if "@" in authority:
        return "must not contain credentials (user:password@)"
    return _host_and_port_text_problem(authority)


def _host_and_port_text_problem(authority: str) -> str:
    if authority.startswith("["):  # an IPv6 literal: httpx checks it whole
        _, _, rest = authority.partition("]")
        has_port, port = bool(rest), rest.removeprefix(":")
    else:
        host, colon, port = authority.partition(":")
        has_port = bool(colon)
        # Judged before httpx: its refusal of "0177.0.0.1" does not say what to write instead.
        numeric = NUMERIC_LABEL.fullmatch(host.rpartition(".")[2].lower())
        if numeric and (problem := _ipv4_problem(host.lower())):
            return problem
    # httpx reads the port with int(), which also takes "1_0", "+80" and "-1".
    if has_port and not (port.isascii() and port.isdigit()):
        return f"is not valid: port {port!r} is not a number from 1 to 65535"
    return ""


def embedded_ipv4(address: IPAddress) -> IPAddress:
    """The IPv4 address inside an IPv4-mapped or NAT64 IPv6 address (else `address` itself)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def refusal_reason(address: IPAddress, *, allow_private: bool) -> str:
    """Why `address` must not be contacted ("" when it may be): THE outbound address policy.

    The guarded client applies it to every address a name resolves to, and webhook subscriptions
    to literal addresses when they are saved. Metadata,
    link-local, unspecified and multicast addresses are always refused; loopback, private and
    carrier-grade NAT addresses only while `allow_private` (development) is off.
    """
    address = embedded_ipv4(address)
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if address.is_link_local or address.is_unspecified or address.is_multicast:
        return "a link-local, unspecified or multicast address"
    if address.is_global:
        return ""
    internal = (
        ("a loopback address", address.is_loopback),
        ("a carrier-grade NAT address", isinstance(address, ipaddress.IPv4Address)
         and address in CGNAT),
        ("a private address", address.is_private),
    )  # fmt: skip
    for label, hit in internal:
        if hit:
            return "" if allow_private else label
    return "a non-public (reserved) address"


def refusal_with_hint(address: IPAddress, *, allow_private: bool, setting: str) -> str:
    """`refusal_reason` for messages: names the switch `setting` if it would allow `address`."""
    why = refusal_reason(address, allow_private=allow_private)
    if not why:
        return ""
    if refusal_reason(address, allow_private=True):
        return f"{why} (SSRF protection)"
    return f"{why} (SSRF protection; {switch_hint(setting)})"


def switch_hint(setting: str) -> str:
    """How an operator allows private targets, for refusal messages."""
    return f"set {setting}=true only for development"


def retry_after_seconds(value: str | None, now: dt.datetime | None = None) -> float | None:
    """Seconds a `Retry-After` header asks to wait: delta seconds ("120", "1.5") or an
    HTTP-date (always GMT, RFC 9110), never negative; None when absent or unreadable.
    `now` is the moment the date is measured from (default: now)."""
    if not value or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(seconds, 0.0) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max((when - (now or dt.datetime.now(dt.UTC))).total_seconds(), 0.0)
