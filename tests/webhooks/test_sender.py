"""One attempt never raises: unsendable URLs, refused addresses and bugs all come back as results.

Against a real receiver on loopback. The fuzz checks that whatever URL a subscription accepts,
the transport sends as it was judged (same port and path), and that whatever URL a row holds,
`send` returns a result instead of raising.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import httpcore
import pytest
from django.test.utils import override_settings
from hypothesis import given, settings
from hypothesis import strategies as st

from eventbus.store.event import Event
from tests.support.network import loopback_only
from tests.support.receiver import Receiver
from tests.webhooks.conftest import LOOPBACK_OK
from webhooks import sender, signing, ssrf
from webhooks.sender import build_client

EVENT = Event(
    id=uuid.uuid4(),
    organization_id=uuid.uuid4(),
    event_type="lead.assigned",
    entity_kind="lead",
    entity_id=None,
    payload={"to_owner_id": "u1"},
    metadata={},
    created_at=dt.datetime(2026, 11, 2, 12, 0, tzinfo=dt.UTC),
    consumer="webhook:x",
    delivery_id=1,
    attempt=1,
    max_attempts=8,
)


def target(url: str) -> sender.Target:
    return sender.Target(uuid.uuid4(), EVENT.organization_id, url, (b"k" * 32,), True)


@pytest.fixture
def loopback_ok() -> Iterator[None]:
    with override_settings(WEBHOOKS=dict(LOOPBACK_OK)):
        yield


class ToReceiver(httpcore.NetworkBackend):
    """Connects every vetted address to the receiver, recording the ports the URLs asked for."""

    def __init__(self, receiver: Receiver) -> None:
        self.receiver = receiver
        self.ports: list[int] = []
        self.inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        self.ports.append(port)
        return self.inner.connect_tcp("127.0.0.1", self.receiver.port, *args, **kwargs)


class Exploding(httpcore.NetworkBackend):
    """A socket layer with a bug: raises something no HTTP client expects."""

    def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("a bug in the socket layer")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://0177.0.0.1:{port}/", "'0177.0.0.1' is not a canonical IPv4 address"),
        ("http://127.1:{port}/", "'127.1' is not a canonical IPv4 address"),
        ("http://2130706433:{port}/", "'2130706433' is not a canonical IPv4 address"),
        ("http://127.0.0.1:{port}/#x", "fragment"),
        ("http://127.0.0.1:{port}0000/", "outside 1-65535"),
        ("gopher://127.0.0.1:{port}/", "http or https"),
        ("http://xn--a.localhost:{port}/", "not valid IDNA"),
    ],
)
def test_a_stored_url_the_transport_cannot_send_is_an_invalid_url_result(
    loopback_ok: None, receiver: Receiver, url: str, message: str
) -> None:
    row = target(url.format(port=receiver.port))
    with build_client() as client:
        result = sender.send(client, row, EVENT)
    assert (result.ok, result.status_code, result.error_class) == (False, None, "InvalidURL")
    assert result.error.startswith("InvalidURL: url ") and message in result.error
    assert result.webhook_id == signing.delivery_id(EVENT.id, row.subscription_id)
    assert result.url == row.url and receiver.connections == 0


def test_a_bug_while_signing_is_a_result_logged_once_with_its_traceback(
    loopback_ok: None,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> str:
        raise RuntimeError("the signer broke")

    monkeypatch.setattr(signing, "signature", broken)
    with build_client() as client, caplog.at_level(logging.ERROR, logger="webhooks.sender"):
        result = sender.send(client, target(receiver.url()), EVENT)
    assert (result.status_code, result.error_class) == (None, "RuntimeError")
    assert result.error == "RuntimeError: the signer broke"
    [record] = caplog.records
    assert record.exc_info is not None and "RuntimeError" in record.getMessage()
    assert receiver.connections == 0


def test_a_bug_below_the_http_client_is_a_result(loopback_ok: None) -> None:
    with build_client(resolver=lambda host, port: ["127.0.0.1"], backend=Exploding()) as client:
        result = sender.send(client, target("http://hooks.example.test/in"), EVENT)
    assert result.error_class == "ZeroDivisionError"
    assert result.error == "ZeroDivisionError: a bug in the socket layer"


def test_a_refused_address_stays_a_blocked_destination(receiver: Receiver) -> None:
    with (
        override_settings(WEBHOOKS={**LOOPBACK_OK, "ALLOW_PRIVATE_TARGETS": False}),
        build_client() as client,
    ):
        result = sender.send(client, target(receiver.url()), EVENT)
    assert result.error_class == "BlockedDestination" and "loopback" in result.error
    assert "WEBHOOKS_ALLOW_PRIVATE_TARGETS" in result.error and receiver.connections == 0


# -- fuzz ---------------------------------------------------------------------------------------

NUMBER = st.integers(0, 2**32).flatmap(
    lambda n: st.sampled_from([str(n), f"0{n:o}", hex(n), hex(n).upper()])
)
PRINTABLE = st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp"))
LABEL = st.from_regex(r"[a-zA-Z0-9_][a-zA-Z0-9_-]{0,10}", fullmatch=True)
# Hosts a subscription may well be given, and ones it must refuse.
PLAUSIBLE_HOSTS = st.one_of(
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(v=6).map(lambda a: f"[{a}]"),
    st.lists(LABEL, min_size=1, max_size=4).map(".".join),
    st.lists(NUMBER, min_size=1, max_size=5).map(".".join),  # inet_aton's forms, and more
    st.just("localhost"),
)
ODD_HOSTS = st.one_of(
    st.lists(st.text("abz09-_%.\\ü@:[]\u3002", max_size=12), min_size=1, max_size=4).map(".".join),
    st.text(max_size=20),
)
PLAUSIBLE_URLS = st.tuples(
    st.sampled_from(["http", "https", "HTTP"]),
    st.just("://"),
    PLAUSIBLE_HOSTS,
    st.one_of(st.just(""), st.integers(1, 65_535).map(lambda p: f":{p}")),
    st.one_of(st.just(""), st.text(PRINTABLE, max_size=20).map(lambda t: f"/{t}")),
).map("".join)
ODD_URLS = st.tuples(
    st.sampled_from(["http", "https", "HTTP", "ftp", ""]),
    st.sampled_from(["://", ":/", ":", "//"]),
    st.one_of(st.just(""), st.text(max_size=5).map(lambda t: f"{t}@")),
    st.one_of(PLAUSIBLE_HOSTS, ODD_HOSTS),
    st.one_of(
        st.just(""),
        st.integers(-2, 70_000).map(lambda p: f":{p}"),
        st.text("0123456789_+- x", max_size=6).map(lambda t: f":{t}"),
    ),
    st.text(max_size=20),
).map("".join)
URLS = st.one_of(PLAUSIBLE_URLS, ODD_URLS)


def test_every_url_a_subscription_accepts_is_sent_as_judged(
    loopback_ok: None, receiver: Receiver
) -> None:
    backend = ToReceiver(receiver)
    # An https URL fails at the handshake (the receiver answers the ClientHello with a 400 and
    # closes): that takes milliseconds, but on a loaded machine the receiver's thread once took
    # longer than the 3 s connect timeout, and a Timeout is not what this test is about. With a
    # budget no loaded machine reaches, the outcome no longer depends on scheduling.
    patient = {**LOOPBACK_OK, "CONNECT_TIMEOUT": 60.0, "TIMEOUT": 60.0}
    with override_settings(WEBHOOKS=patient):
        client = build_client(resolver=lambda host, port: ["127.0.0.1"], backend=backend)

    @settings(max_examples=400, deadline=None, database=None, derandomize=True)
    @given(URLS)
    def attempt(url: str) -> None:
        result = sender.send(client, target(url), EVENT)  # never raises, whatever the row holds
        try:
            ssrf.validate_url(url)
        except ValueError:
            assert result.ok or result.error_class
            return
        parsed = ssrf.sendable_url(url)
        if parsed.scheme == "https":  # the receiver speaks plain HTTP: the handshake fails
            assert result.error_class == "ConnectError", result.error
            return
        assert result.ok, (url, result.error)
        request = receiver.requests[-1]
        # http.server turns a leading "//" into "/" (CPython gh-87389): compare past it.
        sent_path = "/" + parsed.raw_path.decode().lstrip("/")
        assert (request.path, request.headers["host"]) == (sent_path, parsed.netloc.decode())
        assert (parsed.port or 80) in backend.ports  # now or by a pooled connection

    with client, loopback_only() as refused:
        attempt()
    assert refused == []
