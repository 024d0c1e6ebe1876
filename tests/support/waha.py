"""A fake WAHA server on loopback for the WhatsApp tests: real HTTP, WAHA's documented shapes.

- `POST /api/sendText` {session, chatId, text} and `POST /api/sendImage|sendFile` {session,
  chatId, file{mimetype, filename, url}, caption}: 201 and the sent message as the session's
  engine (`engine`) answers it: WEBJS whatsapp-web.js's Message ({id: {fromMe, remote, id,
  _serialized: "true_<chatId>_<KEY>"}, ...}), NOWEB Baileys' WebMessageInfo ({key: {remoteJid:
  "<digits>@s.whatsapp.net", fromMe, id: <KEY>}, message, messageTimestamp: "<seconds>", status:
  "PENDING"}), GOWS WAHA's WAMessage ({id: "true_<chatId>_<KEY>", timestamp, ...}); 401 without
  the right `X-Api-Key`, 422 for an unknown or not WORKING session, 400 for a chat id that is not
  one (a person's `@c.us`, a `@lid` or a group's `@g.us`).
- `GET /api/{session}/lids/{lid}`: {lid, pn} from `lids` (pn null for an unknown lid).
- `GET /api/sessions?all=true`: [{name, status, config, me, engine}].
- `GET /api/{session}/chats/{chatId}/messages?limit=N&downloadMedia=false`: the chat's messages,
  newest first (those this server accepted, fromMe), as WAMessage: every engine says `@c.us`.
`ack_payload(...)` builds a `message.ack` webhook payload as WAHA sends it (id
"true_<chatId>_<KEY>" with `@c.us`, or the `@lid` chat when WhatsApp addresses the receipt so).

Misbehaviour on demand for the next sends (`fail_next`): an HTTP status (e.g. 500, 429 with
Retry-After), a delay past the client's timeout, or `accept_then_drop` (the message is accepted
and stored, then the connection is closed without an answer), optionally after waiting on
`release` (`hold=True`: the test kills the caller while the request hangs); `before_answer`
runs a callback (e.g. posting the receipt webhook) between accepting and answering.
`signed_webhook(...)` builds a webhook body and its HMAC headers as WAHA sends them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.support.http_server import serving

SEND_PATHS = ("/api/sendText", "/api/sendImage", "/api/sendFile")


@dataclass
class Misbehaviour:
    status: int | None = None  # answer this status (with `headers`)
    headers: dict[str, str] = field(default_factory=dict)
    # Sleep this long before answering. With `status` nothing is stored; without, the message is
    # stored first and the answer is late (WAHA took it, then a slow answer): a caller that timed
    # out finds it on its retry whatever the machine's load.
    delay: float = 0.0
    accept_then_drop: bool = False  # store the message, then close without answering
    hold: bool = False  # with accept_then_drop: wait for `release` first
    # Called with the stored message before the answer goes out (WAHA's `message.ack` webhook
    # can reach us before the send's answer does).
    before_answer: Callable[[dict[str, Any]], None] | None = None


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None


class FakeWaha(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, *, api_key: str = "", engine: str = "NOWEB") -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.api_key = api_key
        self.engine = engine  # WEBJS, NOWEB (docker-compose's) or GOWS: the send answer's shape
        self.lids: dict[str, str] = {}  # "<n>@lid" -> "<digits>@c.us"
        self.lock = threading.Lock()
        self.calls: list[Call] = []
        self.sessions: dict[str, str] = {}  # name -> status
        self.chats: dict[str, list[dict[str, Any]]] = {}  # chatId -> messages, oldest first
        self.plan: list[Misbehaviour] = []
        self.accepted = threading.Event()  # set when a send was accepted (stored)
        self.release = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def fail_next(self, *plan: Misbehaviour) -> None:
        with self.lock:
            self.plan.extend(plan)

    def sends(self) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.method == "POST" and c.path in SEND_PATHS]

    def accept(self, body: dict[str, Any]) -> dict[str, Any]:
        """Store the message (WAMessage, as the chat-messages call lists it); return the engine's
        answer to the send."""
        chat_id = str(body["chatId"])
        key = secrets.token_hex(10).upper()
        message = {
            "id": f"true_{chat_id}_{key}",
            "timestamp": int(time.time()),
            "from": "5511900000000@c.us",
            "fromMe": True,
            "to": chat_id,
            "body": body.get("text", body.get("caption", "")) or "",
            "hasMedia": "file" in body,
            "ack": 1,
            "ackName": "SERVER",
        }
        with self.lock:
            self.chats.setdefault(chat_id, []).append(message)
        self.accepted.set()
        return engine_answer(self.engine, message, key)


def engine_answer(engine: str, message: dict[str, Any], key: str) -> dict[str, Any]:
    """A send's answer in `engine`'s documented shape, for the stored WAMessage `message`."""
    chat_id = str(message["to"])
    if engine == "WEBJS":
        return {
            **message,
            "id": {"fromMe": True, "remote": chat_id, "id": key, "_serialized": message["id"]},
            "_data": {"id": {"fromMe": True, "remote": chat_id, "id": key}},
        }
    if engine == "NOWEB":
        jid = chat_id.replace("@c.us", "@s.whatsapp.net")
        return {
            "key": {"remoteJid": jid, "fromMe": True, "id": key},
            "message": {"extendedTextMessage": {"text": message["body"]}},
            "messageTimestamp": str(message["timestamp"]),
            "status": "PENDING",
        }
    return {**message, "_data": {"Info": {"ID": key, "Chat": chat_id, "IsFromMe": True}}}


ACK_NAMES = {-1: "ERROR", 0: "PENDING", 1: "SERVER", 2: "DEVICE", 3: "READ", 4: "PLAYED"}


def ack_payload(message_id: str, ack: int, *, chat_id: str | None = None) -> dict[str, Any]:
    """The `payload` of WAHA's `message.ack` webhook for our message `message_id` (WAMessage id,
    "true_<chatId>_<KEY>"); `chat_id`: the chat WhatsApp addressed the receipt with (a `@lid`)."""
    _, chat, key = message_id.split("_", 2)
    chat = chat_id or chat
    return {
        "id": f"true_{chat}_{key}",
        "from": chat,
        "fromMe": True,
        "participant": None,
        "ack": ack,
        "ackName": ACK_NAMES[ack],
        "_data": {},
    }


class _Handler(BaseHTTPRequestHandler):
    server: FakeWaha
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes: without this, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every keep-alive answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self._serve(None)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            self._answer(400, {"statusCode": 400, "message": "invalid JSON"})
            return
        self._serve(body)

    def _serve(self, body: dict[str, Any] | None) -> None:
        fake = self.server
        split = urlsplit(self.path)
        path, query = split.path, parse_qs(split.query)
        with fake.lock:
            fake.calls.append(
                Call(self.command, path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
        if fake.api_key and self.headers.get("X-Api-Key") != fake.api_key:
            self._answer(401, {"statusCode": 401, "message": "Unauthorized"})
            return
        if self.command == "GET" and path == "/api/sessions":
            with fake.lock:
                listed = [
                    {
                        "name": n,
                        "status": s,
                        "config": {},
                        "me": {"id": "5511900000000@c.us", "pushName": "Loja"}
                        if s == "WORKING"
                        else None,
                        "engine": {"engine": fake.engine},
                    }
                    for n, s in fake.sessions.items()
                ]
            self._answer(200, listed)
            return
        parts = path.split("/")
        if self.command == "GET" and len(parts) == 5 and parts[3] == "lids":
            lid = unquote(parts[4])
            with fake.lock:
                pn = fake.lids.get(lid)
            self._answer(200, {"lid": lid, "pn": pn})
            return
        if self.command == "GET" and len(parts) == 6 and parts[3] == "chats":
            chat_id = unquote(parts[4])
            limit = int(query.get("limit", ["100"])[0])
            with fake.lock:
                found = list(reversed(fake.chats.get(chat_id, [])))[:limit]
            self._answer(200, found)
            return
        if self.command == "POST" and path in SEND_PATHS and body is not None:
            self._send(body)
            return
        self._answer(404, {"statusCode": 404, "message": f"Cannot {self.command} {path}"})

    def _send(self, body: dict[str, Any]) -> None:
        fake = self.server
        with fake.lock:
            step = fake.plan.pop(0) if fake.plan else None
        if step and step.status:
            time.sleep(step.delay)
            self._answer(
                step.status, {"statusCode": step.status, "message": "planned"}, step.headers
            )
            return
        with fake.lock:
            status = fake.sessions.get(str(body.get("session")))
        if status != "WORKING":
            self._answer(422, {"statusCode": 422, "message": "Session status is not as expected"})
            return
        if not str(body.get("chatId", "")).endswith(("@c.us", "@g.us", "@lid")):
            self._answer(400, {"statusCode": 400, "message": "invalid chatId"})
            return
        answer = fake.accept(body)
        if step and step.before_answer:
            with fake.lock:
                stored = fake.chats[str(body["chatId"])][-1]
            step.before_answer(stored)
        if step and step.delay:
            time.sleep(step.delay)
        if step and step.accept_then_drop:
            if step.hold:
                fake.release.wait(timeout=120)
            self.close_connection = True
            self.connection.close()
            return
        self._answer(201, answer)

    def _answer(self, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the caller went away (killed, timed out)
            pass

    def log_message(self, format: str, *args: object) -> None:
        return


@contextmanager
def fake_waha(*, api_key: str = "", engine: str = "NOWEB") -> Iterator[FakeWaha]:
    fake = FakeWaha(api_key=api_key, engine=engine)
    with serving(fake, "fake-waha", before_stop=fake.release.set) as server:
        yield server


def inbound_message(
    chat_id: str, body: str, *, message_id: str | None = None, name: str = "Maria"
) -> dict[str, Any]:
    """The `payload` of WAHA's `message` webhook for a message a contact sent us."""
    return {
        "id": message_id or f"false_{chat_id}_{secrets.token_hex(10).upper()}",
        "timestamp": int(time.time()),
        "from": chat_id,
        "fromMe": False,
        "to": "5511900000000@c.us",
        "body": body,
        "hasMedia": False,
        "ack": 1,
        "ackName": "SERVER",
        "_data": {"notifyName": name},
    }


def signed_webhook(
    session: str,
    event: str,
    payload: dict[str, Any],
    *,
    secret: str,
    event_id: str | None = None,
    timestamp_ms: int | None = None,
    engine: str = "NOWEB",
) -> tuple[bytes, dict[str, str]]:
    """A webhook body as WAHA posts it, and its headers (HMAC-SHA512 of the raw body)."""
    body = json.dumps(
        {
            "id": event_id or f"evt_{secrets.token_hex(12)}",
            "timestamp": int(time.time() * 1000) if timestamp_ms is None else timestamp_ms,
            "event": event,
            "session": session,
            "metadata": {},
            "me": {"id": "5511900000000@c.us", "pushName": "Loja"},
            "payload": payload,
            "engine": engine,
            "environment": {"version": "2024.x", "engine": engine, "tier": "CORE"},
        }
    ).encode()
    digest = hmac.new(secret.encode(), body, hashlib.sha512).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "X-Webhook-Request-Id": secrets.token_hex(8),
        "X-Webhook-Timestamp": str(int(time.time() * 1000)),
        "X-Webhook-Hmac": digest,
        "X-Webhook-Hmac-Algorithm": "sha512",
    }
    return body, headers
