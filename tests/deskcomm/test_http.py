"""The SSRF-guarded outbound HTTP client, against a real server on loopback."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from deskcomm.http import GuardedTransport, UnsafeDestinationError, guarded_client, refusal_reason
from tests.support.http_server import LoopbackServer, Reply, loopback_server


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with loopback_server() as running:
        yield running


@pytest.fixture
def allow_private(settings: Any) -> None:
    settings.OUTBOUND_HTTP_ALLOW_PRIVATE = True


def resolver_to(*addresses: str) -> Any:
    def resolve(host: str, port: int, **kwargs: Any) -> list[tuple[Any, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]

    return resolve


def test_loopback_is_reachable_only_with_the_allow_setting(
    server: LoopbackServer, settings: Any
) -> None:
    settings.OUTBOUND_HTTP_ALLOW_PRIVATE = False
    with guarded_client() as client, pytest.raises(UnsafeDestinationError, match="loopback"):
        client.get(server.url("/blocked"))
    assert server.received == []

    settings.OUTBOUND_HTTP_ALLOW_PRIVATE = True
    with guarded_client() as client:
        response = client.post(server.url("/hook"), json={"text": "hi"})
    assert (response.status_code, response.text) == (200, "ok")
    (request,) = server.received
    assert (request.method, request.path, request.body) == ("POST", "/hook", b'{"text":"hi"}')


def test_names_resolving_to_loopback_are_refused(server: LoopbackServer, settings: Any) -> None:
    settings.OUTBOUND_HTTP_ALLOW_PRIVATE = False
    with guarded_client() as client, pytest.raises(UnsafeDestinationError):
        client.get(server.url("/", host="localhost"))
    assert server.received == []


def test_connects_to_the_vetted_address_and_keeps_the_host_name(
    server: LoopbackServer, allow_private: None
) -> None:
    transport = GuardedTransport(resolver=resolver_to("127.0.0.1"))
    with httpx.Client(transport=transport) as client:
        response = client.get(f"http://hooks.example.test:{server.port}/pinned")
    assert response.status_code == 200
    assert server.received[0].headers["host"] == f"hooks.example.test:{server.port}"


def test_a_name_with_one_private_answer_is_refused(allow_private: None) -> None:
    transport = GuardedTransport(
        allow_private=False, resolver=resolver_to("93.184.216.34", "10.0.0.5")
    )
    with pytest.raises(UnsafeDestinationError, match="10.0.0.5"):
        transport.vet(httpx.URL("https://rebind.example.test/"))


def test_redirects_are_not_followed(server: LoopbackServer, allow_private: None) -> None:
    server.replies["/moved"] = Reply(302, b"", {"Location": "http://169.254.169.254/latest/"})
    with guarded_client() as client:
        response = client.get(server.url("/moved"))
    assert response.status_code == 302
    assert [r.path for r in server.received] == ["/moved"]


@pytest.mark.parametrize(
    "address",
    [
        "169.254.169.254",
        "169.254.170.2",
        "fd00:ec2::254",
        "100.100.100.200",
        "169.254.1.1",
        "0.0.0.0",
        "224.0.0.1",
        "64:ff9b::a9fe:a9fe",  # NAT64 for 169.254.169.254
    ],
)
def test_metadata_link_local_and_unspecified_are_refused_even_when_allowed(address: str) -> None:
    assert refusal_reason(ipaddress.ip_address(address), allow_private=True)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.10",
        "172.16.5.4",
        "::1",
        "fc00::1",
        "::ffff:127.0.0.1",
        "100.64.0.1",
        "64:ff9b::a00:1",  # NAT64 for 10.0.0.1
    ],
)
def test_private_addresses_are_refused_by_default(address: str) -> None:
    assert refusal_reason(ipaddress.ip_address(address), allow_private=False)
    assert refusal_reason(ipaddress.ip_address(address), allow_private=True) == ""


def test_webhooks_apply_the_same_policy() -> None:
    from webhooks import ssrf

    samples = [
        "93.184.216.34", "127.0.0.1", "10.1.2.3", "100.64.0.1", "169.254.1.1", "169.254.170.2",
        "::1", "fe80::1", "64:ff9b::a00:1", "::ffff:10.0.0.1", "0.0.0.0", "224.0.0.1", "240.0.0.1",
    ]  # fmt: skip
    for text in samples:
        address = ipaddress.ip_address(text)
        for allow in (False, True):
            ours = refusal_reason(address, allow_private=allow)
            assert (ssrf.refusal(address, allow_private=allow) or "") == ours, (text, allow)


def test_public_addresses_pass() -> None:
    assert refusal_reason(ipaddress.ip_address("93.184.216.34"), allow_private=False) == ""
    transport = GuardedTransport(allow_private=False)
    assert str(transport.vet(httpx.URL("https://93.184.216.34/hook"))) == "93.184.216.34"


@pytest.mark.parametrize("url", ["ftp://example.com/x", "file:///etc/passwd"])
def test_only_http_and_https(url: str) -> None:
    with pytest.raises(UnsafeDestinationError, match="scheme"):
        GuardedTransport(allow_private=True).vet(httpx.URL(url))


def test_environment_proxies_are_ignored(
    server: LoopbackServer, allow_private: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    with guarded_client() as client:
        assert client.get(server.url("/direct")).status_code == 200


def test_timeouts_come_from_settings_and_connect_is_short(settings: Any) -> None:
    settings.OUTBOUND_HTTP_TIMEOUT = 7.5
    with guarded_client() as client:
        assert (client.timeout.read, client.timeout.connect) == (7.5, 3.0)
    with guarded_client(timeout=1.0) as client:
        assert (client.timeout.read, client.timeout.connect) == (1.0, 1.0)


def test_unresolvable_names_are_a_connect_error() -> None:
    def fail(host: str, port: int, **kwargs: Any) -> list[tuple[Any, ...]]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(httpx.ConnectError, match="cannot resolve"):
        GuardedTransport(resolver=fail).vet(httpx.URL("https://nowhere.invalid/"))
