"""The SSRF-guarded outbound HTTP client, against a real server on loopback."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from core.http import (
    GuardedTransport,
    UnsafeDestinationError,
    UnsendableURL,
    guarded_client,
    parse_url,
    refusal_reason,
)
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


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://0177.0.0.1/", "'0177.0.0.1' is not a canonical IPv4 address"),
        ("http://0x7f.1/", "'0x7f.1' is not a canonical IPv4 address"),
        ("http://0X7F000001/", "'0x7f000001' is not a canonical IPv4 address"),
        ("http://2130706433/", "'2130706433' is not a canonical IPv4 address"),
        ("http://127.1/", "'127.1' is not a canonical IPv4 address"),
        ("http://127.0.1/", "octal, hex, integer and shortened forms are refused"),
        ("http://0x7f.0.0.01/", "not a canonical IPv4"),
        ("http://1.2.3.4.5/", "not a canonical IPv4"),
        ("http://hooks.example.123/", "not a canonical IPv4"),
        ("http://999.1.1.1/", "not a canonical IPv4"),
        ("https://example.com:0/", "port 0 is outside 1-65535"),
        ("https://example.com:65536/", "port 65536 is outside 1-65535"),
        ("https://example.com:1_0/", "port '1_0' is not a number"),
        ("https://example.com:+443/", "port '+443' is not a number"),
        ("https://example.com:/", "port '' is not a number"),
        ("https://[::1]x/", "port 'x' is not a number"),
        ("https://user:pw@example.com/", "credentials"),  # pragma: allowlist secret
        ("https://@example.com/", "credentials"),
        ("https://exa mple.com/", "space character at position 11"),
        ("https://example.com/\x00", "control or space character at position 20"),
        ("https://example.com/a\tb", "control or space character"),
        ("https://example.com/#top", "fragment"),
        ("https://\uff45\uff58ample.com/", "cannot be parsed: Invalid IDNA hostname"),  # fullwidth
        ("https://xn--a.com/", "not valid IDNA"),
        ("https://a..example.com/", "not a valid DNS name (label '')"),
        ("https://example.com./", "not a valid DNS name"),
        ("https://%65xample.com/", "not a valid DNS name (label '%65xample')"),
        ("https://ex\\ample.com/", "not a valid DNS name"),
        ("https://" + "a" * 64 + ".com/", "not a valid DNS name"),
        ("https://" + "a." * 127 + "com/", "longer than 253"),
        ("https://[fe80::1%25eth0]/", "zone identifier"),
        ("https://[zz::1]/", "cannot be parsed: Invalid IPv6 address"),
        ("https:///path", "has no host"),
        ("https:example.com", "must be absolute"),
        ("//example.com/", "must be absolute"),
        ("ftp://example.com/", "http or https, not the scheme 'ftp'"),
        ("file:///etc/passwd", "http or https"),
    ],
)
def test_urls_the_clients_would_send_differently_from_how_they_read_are_refused(
    url: str, message: str
) -> None:
    with pytest.raises(UnsendableURL) as refused:
        parse_url(url)
    assert message in str(refused.value) and str(refused.value).startswith("url ")


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://hooks.example.com/in?a=1", "hooks.example.com"),
        ("HTTPS://Hooks.Example.COM:8443/In", "hooks.example.com"),
        ("https://93.184.216.34/", "93.184.216.34"),
        ("https://[2606:4700::1111]:8443/", "2606:4700::1111"),
        ("https://[0:0:0:0:0:0:0:1]/", "0:0:0:0:0:0:0:1"),
        ("https://ünïcode.example/", "xn--ncode-cta3g.example"),
        ("https://0x7f.example.com/", "0x7f.example.com"),  # a name: only the last label counts
        ("https://_hooks.example.com/", "_hooks.example.com"),
    ],
)
def test_canonical_urls_parse_as_httpx_sends_them(url: str, host: str) -> None:
    assert parse_url(url).raw_host.decode() == host


@pytest.mark.parametrize("host", ["127.1", "2130706433", "0x7f.1"])
def test_the_alert_client_refuses_non_canonical_hosts_without_resolving(
    server: LoopbackServer, allow_private: None, host: str
) -> None:
    lookups: list[str] = []

    def resolve(name: str, port: int, **kwargs: Any) -> list[tuple[Any, ...]]:
        lookups.append(name)
        return resolver_to("127.0.0.1")(name, port)

    transport = GuardedTransport(resolver=resolve)
    with (
        httpx.Client(transport=transport) as client,
        pytest.raises(UnsafeDestinationError, match="not a canonical IPv4 address"),
    ):
        client.post(server.url("/", host=host))
    assert lookups == [] and server.received == []


@pytest.mark.parametrize(
    "url", ["http://0177.0.0.1:{port}/", "http://127.1:{port}/", "http://127.0.0.1:+{port}/"]
)
def test_the_alert_client_turns_an_unsendable_url_into_an_http_error(
    server: LoopbackServer, allow_private: None, url: str
) -> None:
    """Callers catch httpx.HTTPError: httpx's own InvalidURL would escape them."""
    with guarded_client() as client, pytest.raises(httpx.HTTPError, match="url "):
        client.post(url.format(port=server.port), json={"text": "hi"})
    assert server.received == []
