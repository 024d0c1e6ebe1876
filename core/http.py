"""Outbound HTTP with SSRF protection: every request Deskcomm makes to a URL goes through here.

`guarded_client()` returns an httpx client whose transport resolves the host itself, refuses
private, loopback, link-local, cloud-metadata and other non-public addresses (private and
loopback are allowed only with `OUTBOUND_HTTP_ALLOW_PRIVATE`, for development), and connects to
the address it vetted, so a DNS answer that changes between the check and the connect (rebinding)
cannot redirect the request. TLS still verifies the certificate against the host name (SNI).
Redirects are never followed, proxies from the environment are ignored, timeouts are short.

`parse_url()` judges a URL with httpx's own parser (the one that sends it) and refuses what that
parser accepts but no outbound request should carry: non-canonical IPv4 forms (`0177.0.0.1`,
`0x7f.1`, `2130706433`, `127.1`) that resolvers quietly turn into another address, credentials,
fragments, control characters, out-of-range ports, names DNS cannot carry.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable
from typing import Any

import httpx
from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[..., list[tuple[Any, ...]]]

ALLOWED_SCHEMES = ("http", "https")
DEFAULT_PORTS = {"http": 80, "https": 443}
CONNECT_TIMEOUT = 3.0
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


class UnsafeDestinationError(httpx.ConnectError):
    """The URL's scheme or resolved address is not allowed; nothing was sent."""


def guarded_client(
    *, timeout: float | None = None, allow_private: bool | None = None
) -> httpx.Client:
    """An httpx client for untrusted URLs: vetted addresses, no redirects, no env proxies.

    `timeout` defaults to OUTBOUND_HTTP_TIMEOUT (connect at most 3 s); `allow_private` to
    OUTBOUND_HTTP_ALLOW_PRIVATE. Both are read now, not at import.
    """
    total = float(timeout if timeout is not None else settings.OUTBOUND_HTTP_TIMEOUT)
    return GuardedClient(
        transport=GuardedTransport(allow_private=allow_private),
        timeout=httpx.Timeout(total, connect=min(total, CONNECT_TIMEOUT)),
        follow_redirects=False,
        trust_env=False,
    )


class GuardedClient(httpx.Client):
    """Parses URL strings with `parse_url`, so an unsendable one is an UnsafeDestinationError.

    httpx would raise `InvalidURL` (not an `httpx.HTTPError`) for some, and quietly send others
    differently from how they read; callers catch `httpx.HTTPError` for every failure.
    """

    def build_request(self, method: str, url: httpx.URL | str, **kwargs: Any) -> httpx.Request:
        if isinstance(url, str):
            try:
                url = parse_url(url)
            except UnsendableURL as exc:
                raise UnsafeDestinationError(str(exc)) from None
        return super().build_request(method, url, **kwargs)


class GuardedTransport(httpx.HTTPTransport):
    """Resolve, vet, then connect to the vetted address (Host header and SNI keep the name)."""

    def __init__(
        self,
        *,
        allow_private: bool | None = None,
        resolver: Resolver = socket.getaddrinfo,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._allow_private = allow_private
        self._resolve = resolver

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        address = self.vet(request.url)
        pinned = httpx.Request(
            request.method,
            request.url.copy_with(host=str(address)),
            headers=request.headers,  # carries Host: <original name>
            stream=request.stream,
            extensions={**request.extensions, "sni_hostname": request.url.host},
        )
        return super().handle_request(pinned)

    def vet(self, url: httpx.URL) -> IPAddress:
        """The address to connect to, or UnsafeDestinationError."""
        problem = url_problem(url)
        if problem:
            raise UnsafeDestinationError(f"url {problem}")
        addresses = self._addresses(url.host, url.port or DEFAULT_PORTS[url.scheme])
        allow_private = (
            settings.OUTBOUND_HTTP_ALLOW_PRIVATE
            if self._allow_private is None
            else self._allow_private
        )
        # Every answer must pass: a name resolving to one public and one private address is refused.
        for address in addresses:
            refusal = refusal_reason(address, allow_private=allow_private)
            if refusal:
                raise UnsafeDestinationError(f"{url.host} resolves to {address}: {refusal}")
        return addresses[0]

    def _addresses(self, host: str, port: int) -> list[IPAddress]:
        try:
            answers = self._resolve(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise httpx.ConnectError(f"cannot resolve {host}: {exc}") from exc
        addresses = [ipaddress.ip_address(str(answer[4][0]).split("%", 1)[0]) for answer in answers]
        if not addresses:
            raise httpx.ConnectError(f"cannot resolve {host}: no address")
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

    Every outbound client applies it to every address a name resolves to (this module's
    transport for alerts, webhooks.transport's connection backend for webhooks). Metadata,
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
