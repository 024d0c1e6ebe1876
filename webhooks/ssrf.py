"""Webhook URL checks at subscription time, on top of core.http's SSRF policy.

The address policy is core.http's (`refusal_reason`), the one every outbound client applies,
and so is the URL parser (`parse_url`: httpx's own, plus refusals of what it would send
differently from what is written, such as `0177.0.0.1`). Webhooks only have their own switches
for development (WEBHOOKS_ALLOW_PRIVATE_TARGETS, WEBHOOKS_ALLOW_HTTP). The authoritative address
check runs at connection time on every resolved address (core.http's guarded client, built for
webhooks by webhooks.sender.build_client); `validate_url` gives an early, clear error when a
subscription is saved, and `sendable_url` judges the stored URL again before every attempt.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from django.conf import settings

from webhooks.conf import webhook_settings

if TYPE_CHECKING:
    import httpx

# core.http (httpx, httpcore: ~11 MB) is imported by the functions that judge a URL, not here:
# the admin and the services import this module in every process, drain workers included.

MAX_URL_LENGTH = 2000
# The development switch that lets webhooks reach private targets; named in refusals.
ALLOW_PRIVATE_SETTING = "WEBHOOKS_ALLOW_PRIVATE_TARGETS"


def allow_private_targets() -> bool:
    return webhook_settings.ALLOW_PRIVATE_TARGETS


def sendable_url(url: str) -> httpx.URL:
    """The URL as the client sends it, or core.http.UnsendableURL (a ValueError)."""
    from core.http import parse_url

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
    from core.http import refusal_with_hint, switch_hint

    if host == "localhost" or host.endswith(".localhost"):
        if not allow_private_targets():
            raise ValueError(
                "url must not point at localhost "
                f"(SSRF protection; {switch_hint(ALLOW_PRIVATE_SETTING)})"
            )
        return
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return  # a name: checked on every resolution at connection time
    why = refusal_with_hint(
        ip, allow_private=allow_private_targets(), setting=ALLOW_PRIVATE_SETTING
    )
    if why:
        raise ValueError(f"url must not point at {host}: {why}")
