"""A real HTTP server on loopback for outbound-HTTP tests: records requests, answers by path."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypeVar


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b"ok"
    headers: dict[str, str] = field(default_factory=dict)


class LoopbackServer(ThreadingHTTPServer):
    """Answers `replies[path]` (default 200 "ok") and keeps every request in `received`."""

    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__((host, 0), _Handler)
        self.received: list[Received] = []
        self.replies: dict[str, Reply] = {}
        self.got_request = threading.Event()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


class _Handler(BaseHTTPRequestHandler):
    server: LoopbackServer

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.received.append(
            Received(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        )
        self.server.got_request.set()
        reply = self.server.replies.get(self.path, Reply())
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        return


Served = TypeVar("Served", bound=ThreadingHTTPServer)


@contextmanager
def serving(
    server: Served, name: str, *, before_stop: Callable[[], None] | None = None
) -> Iterator[Served]:
    """Run a loopback HTTP server (a fake vendor, a receiver) in a thread for a `with` block;
    `before_stop` releases requests the fake holds open, so the shutdown does not wait for them."""
    thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        if before_stop is not None:
            before_stop()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextmanager
def loopback_server() -> Iterator[LoopbackServer]:
    with serving(LoopbackServer(), "loopback-http") as server:
        yield server
