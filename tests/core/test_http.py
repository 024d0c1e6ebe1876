"""The SSRF-guarded outbound HTTP client, against real servers on loopback."""

from __future__ import annotations

import datetime as dt
import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import httpcore
import httpx
import pytest

from core.http import (
    BlockedDestination,
    Resolver,
    UnsendableURL,
    guarded_client,
    parse_url,
    refusal_reason,
    retry_after_seconds,
)
from tests.support.http_server import LoopbackServer, loopback_server
from tests.support.receiver import Receiver, Reply


class RecordingBackend(httpcore.NetworkBackend):
    """Stands in for the socket layer: records connection attempts and refuses them all."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, int]] = []

    def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        self.attempts.append((host, port))
        raise httpcore.ConnectError("test backend: no connection is ever made")


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with loopback_server() as running:
        yield running


@pytest.fixture
def allow_private(settings: Any) -> None:
    settings.OUTBOUND_HTTP_ALLOW_PRIVATE = True


def resolver_to(*addresses: str) -> Resolver:
    def resolve(host: str, port: int) -> list[str]:
        return list(addresses)

    return resolve


def post(client: httpx.Client, url: str | httpx.URL) -> httpx.Response:
    return client.post(url, content=b"{}")


def test_loopback_is_reachable_only_with_the_allow_setting(
    server: LoopbackServer, settings: Any
) -> None:
    settings.OUTBOUND_HTTP_ALLOW_PRIVATE = False
    with guarded_client() as client, pytest.raises(BlockedDestination, match="loopback"):
        client.get(server.url("/blocked"))
    assert server.received == []

    settings.OUTBOUND_HTTP_ALLOW_PRIVATE = True
    with guarded_client() as client:
        response = client.post(server.url("/hook"), json={"text": "hi"})
    assert (response.status_code, response.text) == (200, "ok")
    (request,) = server.received
    assert (request.method, request.path, request.body) == ("POST", "/hook", b'{"text":"hi"}')


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/hook",
        "http://localhost:{port}/hook",
        "http://[::ffff:127.0.0.1]:{port}/hook",
    ],
)
def test_loopback_targets_are_refused_before_any_connection(receiver: Receiver, url: str) -> None:
    with (
        guarded_client(allow_private=False) as client,
        pytest.raises(BlockedDestination, match="SSRF protection"),
    ):
        post(client, url.format(port=receiver.port))
    assert receiver.connections == 0 and receiver.requests == []


def test_ipv6_loopback_is_refused_before_any_connection() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        server = Receiver(host="::1", family=socket.AF_INET6)
    except OSError as exc:
        pytest.skip(f"cannot listen on [::1]: {exc}")
    try:
        with (
            guarded_client(allow_private=False) as client,
            pytest.raises(BlockedDestination, match="loopback"),
        ):
            post(client, server.url())
        assert server.connections == 0
    finally:
        server.close()


@pytest.mark.parametrize(
    ("host", "allow"),
    [
        ("0.0.0.0", False), ("169.254.169.254", False), ("10.0.0.7", False),
        ("192.168.1.20", False), ("[fd00:ec2::254]", False),
        # metadata and link-local stay refused with private targets allowed
        ("169.254.169.254", True), ("169.254.1.1", True), ("[fd00:ec2::254]", True),
    ],
)  # fmt: skip
def test_private_and_metadata_addresses_are_refused_without_connecting(
    host: str, allow: bool
) -> None:
    backend = RecordingBackend()
    with (
        guarded_client(allow_private=allow, backend=backend) as client,
        pytest.raises(BlockedDestination),
    ):
        post(client, f"http://{host}/latest/meta-data/")
    assert backend.attempts == []


def test_a_name_resolving_to_a_private_address_is_refused(receiver: Receiver) -> None:
    def resolver(host: str, port: int) -> list[str]:
        return {"hooks.example.test": ["127.0.0.1"]}[host]

    refused = r"hooks\.example\.test \(127\.0\.0\.1\)"
    with (
        guarded_client(allow_private=False, resolver=resolver) as client,
        pytest.raises(BlockedDestination, match=refused),
    ):
        post(client, f"http://hooks.example.test:{receiver.port}/hook")
    assert receiver.connections == 0


def test_any_private_address_among_the_answers_refuses_the_name() -> None:
    backend = RecordingBackend()
    client = guarded_client(
        allow_private=False, resolver=resolver_to("93.184.216.34", "10.0.0.1"), backend=backend
    )
    with client, pytest.raises(BlockedDestination, match="10.0.0.1"):
        post(client, "http://mixed.example.test/hook")
    assert backend.attempts == []


def test_public_addresses_pass() -> None:
    assert refusal_reason(ipaddress.ip_address("93.184.216.34"), allow_private=False) == ""
    backend = RecordingBackend()
    with (
        guarded_client(allow_private=False, backend=backend) as client,
        pytest.raises(httpx.ConnectError, match="test backend") as failed,
    ):
        post(client, "https://93.184.216.34/hook")
    assert not isinstance(failed.value, BlockedDestination)
    assert backend.attempts == [("93.184.216.34", 443)]


@pytest.mark.parametrize("url", ["ftp://example.com/x", "file:///etc/passwd"])
def test_only_http_and_https(url: str) -> None:
    with (
        guarded_client(allow_private=True) as client,
        pytest.raises(BlockedDestination, match="scheme"),
    ):
        client.get(url)


def test_the_vetted_address_is_connected_to_with_the_original_host_header(
    receiver: Receiver,
) -> None:
    """Resolved once, then the socket goes to that address: a rebinding answer is never used."""
    answers = iter([["127.0.0.1"], ["10.9.9.9"]])  # the second answer would be a rebinding
    calls: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        calls.append(host)
        return next(answers)

    with guarded_client(allow_private=True, resolver=resolver) as client:
        for _ in range(2):
            assert post(client, f"http://hooks.example.test:{receiver.port}/x").status_code == 200
    assert calls == ["hooks.example.test"]  # one resolution: the pooled connection is reused
    assert receiver.connections == 1
    assert {r.headers["host"] for r in receiver.requests} == {f"hooks.example.test:{receiver.port}"}


def test_a_redirect_to_a_private_address_is_not_followed(receiver: Receiver) -> None:
    receiver.replies["/jump"] = Reply(status=307, headers={"Location": "http://169.254.169.254/"})
    lookups: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    with guarded_client(allow_private=True, resolver=resolver) as client:
        response = post(client, f"http://hooks.example.test:{receiver.port}/jump")
    assert response.status_code == 307 and not response.is_success
    assert lookups == ["hooks.example.test"]
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
        with guarded_client(allow_private=True) as client:
            assert post(client, receiver.url()).status_code == 200
        assert receiver.connections == 1 and proxy.connections == 0
    finally:
        proxy.close()


def test_timeouts_come_from_settings_and_connect_is_short(settings: Any) -> None:
    settings.OUTBOUND_HTTP_TIMEOUT = 7.5
    with guarded_client() as client:
        assert (client.timeout.read, client.timeout.connect) == (7.5, 3.0)
    with guarded_client(timeout=1.0) as client:
        assert (client.timeout.read, client.timeout.connect) == (1.0, 1.0)
    with guarded_client(timeout=httpx.Timeout(4.0, connect=0.5)) as client:
        assert (client.timeout.read, client.timeout.connect) == (4.0, 0.5)


def test_unresolvable_names_are_a_connect_error() -> None:
    def fail(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with (
        guarded_client(resolver=fail) as client,
        pytest.raises(httpx.ConnectError, match="cannot resolve") as failed,
    ):
        client.get("https://nowhere.invalid/")
    assert not isinstance(failed.value, BlockedDestination)  # transient, not refused


def test_a_refusal_names_the_switch_that_would_allow_it(receiver: Receiver) -> None:
    with guarded_client(allow_private=False) as client, pytest.raises(BlockedDestination) as by:
        post(client, receiver.url())
    assert "set OUTBOUND_HTTP_ALLOW_PRIVATE=true only for development" in str(by.value)

    own = guarded_client(allow_private=False, allow_private_setting="ACME_ALLOW_PRIVATE")
    with own as client, pytest.raises(BlockedDestination) as by:
        post(client, receiver.url())
    assert "set ACME_ALLOW_PRIVATE=true" in str(by.value) and "OUTBOUND" not in str(by.value)


def test_a_refusal_the_switch_cannot_lift_does_not_name_it() -> None:
    backend = RecordingBackend()
    with (
        guarded_client(allow_private=False, backend=backend) as client,
        pytest.raises(BlockedDestination, match="metadata") as by,
    ):
        post(client, "http://169.254.169.254/latest/")
    assert "OUTBOUND_HTTP_ALLOW_PRIVATE" not in str(by.value)


@pytest.mark.parametrize(
    "address",
    [
        "169.254.169.254",
        "169.254.170.2",
        "fd00:ec2::254",
        "::ffff:169.254.169.254",
        "100.100.100.200",
        "169.254.1.1",
        "fe80::1",
        "0.0.0.0",
        "::",
        "224.0.0.1",
        "64:ff9b::a9fe:a9fe",  # NAT64 for 169.254.169.254
    ],
)
def test_metadata_link_local_and_unspecified_are_refused_even_when_allowed(address: str) -> None:
    assert refusal_reason(ipaddress.ip_address(address), allow_private=True)
    assert refusal_reason(ipaddress.ip_address(address), allow_private=False)


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
        "::ffff:10.0.0.1",
        "100.64.0.1",
        "64:ff9b::a00:1",  # NAT64 for 10.0.0.1
    ],
)
def test_private_addresses_are_refused_by_default(address: str) -> None:
    assert refusal_reason(ipaddress.ip_address(address), allow_private=False)
    assert refusal_reason(ipaddress.ip_address(address), allow_private=True) == ""


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:4700::1111", "8.8.8.8"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert refusal_reason(ipaddress.ip_address(address), allow_private=False) == ""


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


@pytest.mark.parametrize("host", ["127.1", "2130706433", "0x7f.1", "0x7f.0.0.1"])
def test_the_client_refuses_non_canonical_hosts_before_resolving(
    receiver: Receiver, host: str
) -> None:
    """Below the URL string check too: an httpx.URL keeps such hosts as names."""
    lookups: list[str] = []

    def resolver(name: str, port: int) -> list[str]:
        lookups.append(name)
        return ["127.0.0.1"]

    with (
        guarded_client(allow_private=True, resolver=resolver) as client,
        pytest.raises(BlockedDestination, match="not a canonical IPv4 address"),
    ):
        post(client, httpx.URL(f"http://{host}:{receiver.port}/hook"))
    assert lookups == [] and receiver.connections == 0


@pytest.mark.parametrize(
    "url", ["http://0177.0.0.1:{port}/", "http://127.1:{port}/", "http://127.0.0.1:+{port}/"]
)
def test_the_client_turns_an_unsendable_url_into_an_http_error(
    server: LoopbackServer, allow_private: None, url: str
) -> None:
    """Callers catch httpx.HTTPError: httpx's own InvalidURL would escape them."""
    with guarded_client() as client, pytest.raises(httpx.HTTPError, match="url "):
        client.post(url.format(port=server.port), json={"text": "hi"})
    assert server.received == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        (" 1.5 ", 1.5),
        ("-3", 0.0),
        ("Tue, 01 Dec 2026 12:01:00 GMT", 60.0),
        ("Tue, 01 Dec 2026 11:00:00 GMT", 0.0),  # in the past: no wait
        ("Tue, 01 Dec 2026 12:00:30 -0000", 30.0),  # no zone: GMT, as HTTP dates always are
        ("soon", None),
        ("nan", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_reads_seconds_and_http_dates(
    value: str | None, expected: float | None
) -> None:
    now = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
    assert retry_after_seconds(value, now) == expected
