"""Which addresses a webhook may reach (SSRF protection), and URL checks at subscription time.

The address policy is core.http's (`refusal_reason`), the one every outbound client applies,
and so is the URL parser (`parse_url`: httpx's own, plus refusals of what it would send
differently from what is written, such as `0177.0.0.1`). Webhooks only have their own switches
for development (WEBHOOKS_ALLOW_PRIVATE_TARGETS, WEBHOOKS_ALLOW_HTTP). The authoritative address
check runs at connection time on every resolved address (webhooks.transport); `validate_url`
gives an early, clear error when a subscription is saved, and `sendable_url` judges the stored
URL again before every attempt.
"""

from __future__ import annotations

import ipaddress

import httpx
from django.conf import settings

from core.http import IPAddress, host_problem, parse_url, refusal_reason
from webhooks.conf import webhook_settings

MAX_URL_LENGTH = 2000
ALLOW_PRIVATE_HINT = "set WEBHOOKS_ALLOW_PRIVATE_TARGETS=true only for development"


class BlockedDestination(Exception):
    """A webhook target that must not be contacted (SSRF guard); nothing was sent."""


def refusal(ip: IPAddress, *, allow_private: bool) -> str | None:
    """Why `ip` may not be contacted, or None when it may (core.http's one policy)."""
    return refusal_reason(ip, allow_private=allow_private) or None


def check_host(host: str) -> None:
    """Raise BlockedDestination for a host that resolvers would read as some other address."""
    problem = host_problem(host)
    if problem:
        raise BlockedDestination(f"refused to connect to {host}: url {problem}")


def check_address(host: str, address: str) -> None:
    """Raise BlockedDestination when `address` (resolved from `host`) may not be contacted."""
    why = _refusal_with_hint(ipaddress.ip_address(address))
    if why:
        raise BlockedDestination(f"refused to connect to {host} ({address}): {why}")


def allow_private_targets() -> bool:
    return webhook_settings.ALLOW_PRIVATE_TARGETS


def sendable_url(url: str) -> httpx.URL:
    """The URL as the transport sends it, or core.http.UnsendableURL (a ValueError)."""
    return parse_url(url)


def validate_url(url: str) -> str:
    """Check a subscription URL; returns it, or raises ValueError with a clear message."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError("url is required")
    if len(url) > MAX_URL_LENGTH:
        raise ValueError(f"url is longer than {MAX_URL_LENGTH} characters")
    parsed = sendable_url(url.strip())
    if parsed.scheme == "http" and not (settings.DEBUG or webhook_settings.ALLOW_HTTP):
        raise ValueError("url must use https (set WEBHOOKS_ALLOW_HTTP=true to allow http)")
    _check_literal_host(parsed.raw_host.decode("ascii"))
    return url.strip()


def _check_literal_host(host: str) -> None:
    if host == "localhost" or host.endswith(".localhost"):
        if not allow_private_targets():
            raise ValueError(
                f"url must not point at localhost (SSRF protection; {ALLOW_PRIVATE_HINT})"
            )
        return
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return  # a name: checked on every resolution at connection time
    why = _refusal_with_hint(ip)
    if why:
        raise ValueError(f"url must not point at {host}: {why}")


def _refusal_with_hint(ip: IPAddress) -> str:
    """The refusal, naming the development switch only when that switch would allow `ip`."""
    why = refusal(ip, allow_private=allow_private_targets())
    if not why:
        return ""
    if refusal(ip, allow_private=True):
        return f"{why} (SSRF protection)"
    return f"{why} (SSRF protection; {ALLOW_PRIVATE_HINT})"
