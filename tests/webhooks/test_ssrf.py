"""SSRF guard: forbidden targets are refused with a clear error and never connected to."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import httpcore
import httpx
import pytest
from django.test.utils import override_settings

from tests.support.receiver import Receiver
from webhooks import ssrf
from webhooks.ssrf import BlockedDestination
from webhooks.transport import build_client


class RecordingBackend(httpcore.NetworkBackend):
    """Stands in for the socket layer: records connection attempts and refuses them all."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, int]] = []

    def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        self.attempts.append((host, port))
        raise httpcore.ConnectError("test backend: no connection is ever made")


@pytest.fixture
def strict() -> Iterator[None]:
    with override_settings(WEBHOOKS={"ALLOW_PRIVATE_TARGETS": False, "TIMEOUT": 2.0}):
        yield


def post(client: httpx.Client, url: str) -> httpx.Response:
    return client.post(url, content=b"{}")


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1", "::1", "0.0.0.0", "169.254.169.254", "10.1.2.3", "192.168.0.10",
        "172.16.5.4", "100.64.0.1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::a00:1",
        "fe80::1", "fd00:ec2::254", "224.0.0.1", "::",
    ],
)  # fmt: skip
def test_non_public_addresses_are_refused(address: str) -> None:
    assert ssrf.refusal(ipaddress.ip_address(address), allow_private=False) is not None


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:4700::1111", "8.8.8.8"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert ssrf.refusal(ipaddress.ip_address(address), allow_private=False) is None


@pytest.mark.parametrize(
    "address", ["169.254.169.254", "fd00:ec2::254", "::ffff:169.254.169.254", "0.0.0.0"]
)
def test_metadata_and_unspecified_stay_refused_when_private_targets_are_allowed(
    address: str,
) -> None:
    assert ssrf.refusal(ipaddress.ip_address(address), allow_private=True) is not None
    assert ssrf.refusal(ipaddress.ip_address("10.0.0.1"), allow_private=True) is None


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/hook",
        "http://localhost:{port}/hook",
        "http://[::ffff:127.0.0.1]:{port}/hook",
    ],
)
def test_loopback_targets_are_refused_before_any_connection(
    strict: None, receiver: Receiver, url: str
) -> None:
    with build_client() as client, pytest.raises(BlockedDestination, match="SSRF protection"):
        post(client, url.format(port=receiver.port))
    assert receiver.connections == 0 and receiver.requests == []


def test_ipv6_loopback_is_refused_before_any_connection(strict: None) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        server = Receiver(host="::1", family=socket.AF_INET6)
    except OSError as exc:
        pytest.skip(f"cannot listen on [::1]: {exc}")
    try:
        with build_client() as client, pytest.raises(BlockedDestination, match="loopback"):
            post(client, server.url())
        assert server.connections == 0
    finally:
        server.close()


@pytest.mark.parametrize(
    "host",
    ["0.0.0.0", "169.254.169.254", "10.0.0.7", "192.168.1.20", "[fd00:ec2::254]"],
)
def test_private_and_metadata_addresses_are_refused_without_connecting(
    strict: None, host: str
) -> None:
    backend = RecordingBackend()
    with build_client(backend=backend) as client, pytest.raises(BlockedDestination):
        post(client, f"http://{host}/latest/meta-data/")
    assert backend.attempts == []


def test_a_name_resolving_to_a_private_address_is_refused(strict: None, receiver: Receiver) -> None:
    def resolver(host: str, port: int) -> list[str]:
        return {"hooks.example.test": ["127.0.0.1"]}[host]

    refused = r"hooks\.example\.test \(127\.0\.0\.1\)"
    with (
        build_client(resolver=resolver) as client,
        pytest.raises(BlockedDestination, match=refused),
    ):
        post(client, f"http://hooks.example.test:{receiver.port}/hook")
    assert receiver.connections == 0


def test_any_private_address_among_the_answers_refuses_the_name(strict: None) -> None:
    backend = RecordingBackend()
    client = build_client(resolver=lambda h, p: ["93.184.216.34", "10.0.0.1"], backend=backend)
    with client, pytest.raises(BlockedDestination, match="10.0.0.1"):
        post(client, "http://mixed.example.test/hook")
    assert backend.attempts == []


def test_localhost_by_name_is_refused(strict: None, receiver: Receiver) -> None:
    with build_client() as client, pytest.raises(BlockedDestination):
        post(client, f"http://localhost:{receiver.port}/hook")
    assert receiver.connections == 0


def test_the_vetted_address_is_connected_to_with_the_original_host_header(
    receiver: Receiver,
) -> None:
    """Resolved once, then the socket goes to that address: a rebinding answer is never used."""
    answers = iter([["127.0.0.1"], ["10.9.9.9"]])  # the second answer would be a rebinding
    calls: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        calls.append(host)
        return next(answers)

    with (
        override_settings(WEBHOOKS={"ALLOW_PRIVATE_TARGETS": True}),
        build_client(resolver=resolver) as client,
    ):
        for _ in range(2):
            assert post(client, f"http://hooks.example.test:{receiver.port}/x").status_code == 200
    assert calls == ["hooks.example.test"]  # one resolution: the pooled connection is reused
    assert receiver.connections == 1
    assert {r.headers["host"] for r in receiver.requests} == {f"hooks.example.test:{receiver.port}"}


def test_a_redirect_to_a_private_address_is_not_followed(receiver: Receiver) -> None:
    from tests.support.receiver import Reply

    receiver.replies["/jump"] = Reply(status=307, headers={"Location": "http://169.254.169.254/"})
    backend_calls: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        backend_calls.append(host)
        return ["127.0.0.1"]

    with (
        override_settings(WEBHOOKS={"ALLOW_PRIVATE_TARGETS": True}),
        build_client(resolver=resolver) as client,
    ):
        response = post(client, f"http://hooks.example.test:{receiver.port}/jump")
    assert response.status_code == 307 and not response.is_success
    assert backend_calls == ["hooks.example.test"]
    assert [r.path for r in receiver.requests] == ["/jump"]


def test_environment_proxies_are_ignored(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = Receiver()  # would see the request (or a CONNECT) if the client used the proxy
    try:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
            monkeypatch.setenv(name, proxy.url(""))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        with (
            override_settings(WEBHOOKS={"ALLOW_PRIVATE_TARGETS": True}),
            build_client() as client,
        ):
            assert post(client, receiver.url()).status_code == 200
        assert receiver.connections == 1 and proxy.connections == 0
    finally:
        proxy.close()


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


@pytest.mark.parametrize("host", ["127.1", "2130706433", "0x7f.0.0.1"])
def test_the_transport_refuses_non_canonical_hosts_before_resolving(
    receiver: Receiver, host: str
) -> None:
    lookups: list[str] = []

    def resolver(name: str, port: int) -> list[str]:
        lookups.append(name)
        return ["127.0.0.1"]

    with (
        override_settings(WEBHOOKS={"ALLOW_PRIVATE_TARGETS": True}),
        build_client(resolver=resolver) as client,
        pytest.raises(BlockedDestination, match="not a canonical IPv4 address"),
    ):
        post(client, f"http://{host}:{receiver.port}/hook")
    assert lookups == [] and receiver.connections == 0


def test_https_urls_to_public_names_are_accepted(strict: None) -> None:
    assert ssrf.validate_url(" https://hooks.example.com/in ") == "https://hooks.example.com/in"
    with override_settings(WEBHOOKS={"ALLOW_HTTP": True}):
        assert ssrf.validate_url("http://hooks.example.com/in")
