"""Webhook SSRF checks: subscription URLs at save time, and the webhook client's own switches.

The guarded client itself (resolve, vet every address, connect to the vetted one) is tested
in tests/core/test_http.py.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

import pytest
from django.test.utils import override_settings

from core.http import BlockedDestination, refusal_reason
from tests.support.receiver import Receiver
from webhooks import ssrf
from webhooks.sender import build_client


@pytest.fixture
def strict() -> Iterator[None]:
    with override_settings(WEBHOOKS={"ALLOW_PRIVATE_TARGETS": False, "TIMEOUT": 2.0}):
        yield


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.com/x", "http or https"),
        ("https://user:pw@example.com/x", "credentials"),
        ("http://example.com/x", "must use https"),
        ("https://127.0.0.1/x", "loopback"),
        ("https://[::1]/x", "loopback"),
        ("https://169.254.169.254/x", "metadata"),
        ("https://10.0.0.1/x", "private"),
        ("https://localhost/x", "localhost"),
        ("https:///x", "no host"),
        ("https://example.com:99999/x", "not valid"),
        ("https://0177.0.0.1/x", "'0177.0.0.1' is not a canonical IPv4 address"),
        ("https://0x7f.1/x", "'0x7f.1' is not a canonical IPv4 address"),
        ("https://2130706433/x", "'2130706433' is not a canonical IPv4 address"),
        ("https://127.1/x", "'127.1' is not a canonical IPv4 address"),
        ("https://0x7f.0.0.1/x", "octal, hex, integer and shortened forms are refused"),
        ("https://hooks.example.com/#x", "fragment"),
        ("https://hooks.example.com:0/x", "outside 1-65535"),
        ("https://hooks..example.com/x", "not a valid DNS name"),
        ("https://hooks.example.com/a b", "space character"),
        ("https://hooks.example.com/\r\nX-Injected: 1", "control or space character"),
        ("https://xn--a.example.com/", "not valid IDNA"),
        ("https://" + "x" * 2001, "longer than 2000"),
        ("", "required"),
    ],
)
def test_subscription_urls_are_validated(strict: None, url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ssrf.validate_url(url)


@pytest.mark.parametrize(
    ("url", "hint"),
    [
        ("https://127.0.0.1/x", True),
        ("https://10.0.0.1/x", True),
        ("https://localhost/x", True),
        ("https://[::ffff:192.168.0.1]/x", True),
        ("https://169.254.169.254/x", False),  # the switch would not allow these: not named
        ("https://0.0.0.0/x", False),
    ],
)
def test_a_private_target_is_refused_naming_the_development_switch(
    strict: None, url: str, hint: bool
) -> None:
    with pytest.raises(ValueError, match="SSRF protection") as refused:
        ssrf.validate_url(url)
    assert ("WEBHOOKS_ALLOW_PRIVATE_TARGETS=true" in str(refused.value)) is hint


def test_https_urls_to_public_names_are_accepted(strict: None) -> None:
    assert ssrf.validate_url(" https://hooks.example.com/in ") == "https://hooks.example.com/in"
    with override_settings(WEBHOOKS={"ALLOW_HTTP": True}):
        assert ssrf.validate_url("http://hooks.example.com/in")


@pytest.mark.parametrize("allow", [False, True])
@pytest.mark.parametrize(
    "address",
    [
        "93.184.216.34", "127.0.0.1", "10.1.2.3", "100.64.0.1", "169.254.1.1", "169.254.170.2",
        "::1", "fe80::1", "64:ff9b::a00:1", "::ffff:10.0.0.1", "0.0.0.0", "224.0.0.1", "240.0.0.1",
    ],
)  # fmt: skip
def test_subscriptions_to_literal_addresses_apply_the_one_policy(address: str, allow: bool) -> None:
    host = f"[{address}]" if ":" in address else address
    refused = bool(refusal_reason(ipaddress.ip_address(address), allow_private=allow))
    with override_settings(WEBHOOKS={"ALLOW_PRIVATE_TARGETS": allow}):
        try:
            ssrf.validate_url(f"https://{host}/hook")
        except ValueError:
            assert refused, address
        else:
            assert not refused, address


def test_the_webhook_client_reads_the_webhook_switch_not_the_generic_one(
    settings: Any, receiver: Receiver
) -> None:
    settings.OUTBOUND_HTTP_ALLOW_PRIVATE = True
    with (
        override_settings(WEBHOOKS={"ALLOW_PRIVATE_TARGETS": False}),
        build_client() as client,
        pytest.raises(BlockedDestination, match="loopback") as refused,
    ):
        client.post(receiver.url(), content=b"{}")
    assert "set WEBHOOKS_ALLOW_PRIVATE_TARGETS=true only for development" in str(refused.value)
    assert receiver.connections == 0


def test_the_webhook_client_takes_the_webhook_timeouts() -> None:
    with (
        override_settings(WEBHOOKS={"TIMEOUT": 4.0, "CONNECT_TIMEOUT": 1.5}),
        build_client() as client,
    ):
        assert (client.timeout.read, client.timeout.connect, client.timeout.pool) == (4.0, 1.5, 4.0)
    with override_settings(WEBHOOKS={"TIMEOUT": 1.0}), build_client() as client:
        assert (client.timeout.read, client.timeout.connect) == (1.0, 1.0)
