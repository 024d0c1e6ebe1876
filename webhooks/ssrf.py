"""Which addresses a webhook may reach (SSRF protection), and URL checks at subscription time.

The address policy is deskcomm.http's (`refusal_reason`), the one every outbound client applies;
webhooks only have their own switch for development (WEBHOOKS_ALLOW_PRIVATE_TARGETS). The
authoritative check runs at connection time on every resolved address (webhooks.transport);
`validate_url` gives an early, clear error when a subscription is saved.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from django.conf import settings

from deskcomm.http import IPAddress, refusal_reason
from webhooks.conf import webhook_settings


class BlockedDestination(Exception):
    """A webhook target that must not be contacted (SSRF guard); nothing was sent."""


def refusal(ip: IPAddress, *, allow_private: bool) -> str | None:
    """Why `ip` may not be contacted, or None when it may (deskcomm.http's one policy)."""
    return refusal_reason(ip, allow_private=allow_private) or None


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
