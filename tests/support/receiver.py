"""A real HTTP receiver on loopback for webhook tests: records every request and connection.

Each path can answer with its own status, headers, body and delay; a delay waits on an Event
that the fixture sets at teardown, so a "slow endpoint" never outlives its test.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    status: int = 200
    body: bytes = b"ok"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to hold the answer (the release event cuts it short)


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() when the request was read


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 64  # several clients connect at once; the default backlog is 5

    def __init__(self, receiver: Receiver, address: tuple[str, int], family: int) -> None:
        self.address_family = family
        self.receiver = receiver
        super().__init__(address, _Handler)

    def get_request(self) -> tuple[socket.socket, object]:
        conn = super().get_request()
        with self.receiver.lock:
            self.receiver.connections += 1
        return conn


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like a real receiver
    server: _Server

    def do_POST(self) -> None:
        receiver = self.server.receiver
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        receiver.record(Received(self.path, headers, body, time.monotonic()))
        reply = receiver.reply_for(self.path)
        if reply.delay:
            receiver.release.wait(reply.delay)
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet test output


class Receiver:
    """`url(path)`, `replies[path] = Reply(...)`, `requests`, `connections`, `wait_for(...)`."""

    def __init__(self, host: str = "127.0.0.1", family: int = socket.AF_INET) -> None:
        self.lock = threading.Condition()
        self.requests: list[Received] = []
        self.connections = 0
        self.replies: dict[str, Reply] = {}
        self.release = threading.Event()
        self.host = host
        self._server = _Server(self, (host, 0), family)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, path: str = "/hook", host: str | None = None) -> str:
        host = host or (f"[{self.host}]" if ":" in self.host else self.host)
        return f"http://{host}:{self.port}{path}"

    def reply_for(self, path: str) -> Reply:
        return self.replies.get(path, Reply())

    def record(self, request: Received) -> None:
        with self.lock:
            self.requests.append(request)
            self.lock.notify_all()

    def on(self, path: str) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if r.path == path]

    def wait_for(self, condition: Callable[[], bool], *, timeout: float, what: str) -> None:
        with self.lock:
            if not self.lock.wait_for(condition, timeout=timeout):
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")

    def close(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
