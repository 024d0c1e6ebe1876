"""Which addresses a webhook may reach (SSRF protection), and URL checks at subscription time.

The authoritative check runs at connection time on every resolved address (webhooks.transport);
`validate_url` gives an early, clear error when a subscription is saved.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from django.conf import settings

from webhooks.conf import webhook_settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud metadata services: never reachable, even when private targets are allowed.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254")
)
CGNAT = ipaddress.ip_network("100.64.0.0/10")
NAT64 = ipaddress.ip_network("64:ff9b::/96")


class BlockedDestination(Exception):
    """A webhook target that must not be contacted (SSRF guard); nothing was sent."""


def embedded_ipv4(ip: IPAddress) -> IPAddress:
    """The IPv4 address hidden in an IPv4-mapped or NAT64 IPv6 address (else `ip` itself)."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip in NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def refusal(ip: IPAddress, *, allow_private: bool) -> str | None:
    """Why `ip` may not be contacted, or None when it may."""
    ip = embedded_ipv4(ip)
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_multicast:
        return "a multicast address"
    if allow_private:
        return None
    for label, hit in (
        ("a loopback address", ip.is_loopback),
        ("a link-local address", ip.is_link_local),
        ("a carrier-grade NAT address", isinstance(ip, ipaddress.IPv4Address) and ip in CGNAT),
        ("a private address", ip.is_private),
    ):
        if hit:
            return label
    return None if ip.is_global else "a non-public address"


def check_address(host: str, address: str) -> None:
    """Raise BlockedDestination when `address` (resolved from `host`) may not be contacted."""
    why = refusal(ipaddress.ip_address(address), allow_private=allow_private_targets())
    if why:
        raise BlockedDestination(
            f"refused to connect to {host} ({address}): {why} (SSRF protection; set "
            "WEBHOOKS_ALLOW_PRIVATE_TARGETS=true only for development)"
        )


def allow_private_targets() -> bool:
    return bool(webhook_settings.ALLOW_PRIVATE_TARGETS)


def validate_url(url: str) -> str:
    """Check a subscription URL; returns it, or raises ValueError with a clear message."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError("url is required")
    if len(url) > 2000:
        raise ValueError("url is longer than 2000 characters")
    try:
        parts = urlsplit(url.strip())
        hostname = parts.hostname
        parts.port  # noqa: B018  (raises ValueError for a bad port)
    except ValueError as exc:
        raise ValueError(f"url is not valid: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError("url must use http or https")
    if parts.scheme == "http" and not (settings.DEBUG or webhook_settings.ALLOW_HTTP):
        raise ValueError("url must use https (set WEBHOOKS_ALLOW_HTTP=true to allow http)")
    if parts.username is not None or parts.password is not None:
        raise ValueError("url must not contain credentials (user:password@)")
    if not hostname:
        raise ValueError("url has no host")
    _check_literal_host(hostname)
    return url.strip()


def _check_literal_host(hostname: str) -> None:
    allow = allow_private_targets()
    if hostname == "localhost" or hostname.endswith(".localhost"):
        if not allow:
            raise ValueError("url must not point at localhost (SSRF protection)")
        return
    try:
        ip = ipaddress.ip_address(hostname)
    except ValueError:
        return  # a name: checked on every resolution at connection time
    why = refusal(ip, allow_private=allow)
    if why:
        raise ValueError(f"url must not point at {why} ({hostname}) (SSRF protection)")
