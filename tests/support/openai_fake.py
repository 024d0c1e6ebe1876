"""A fake OpenAI-compatible server on loopback: `POST /v1/chat/completions` and
`POST /v1/embeddings` with the documented response shapes (`usage` included), and failures on
demand (429 with Retry-After, 500, a hang past the client's timeout).

Answers are deterministic: the chat reply is `model_replies[model]`, else `reply_text` (default:
echoes the last user message),
embeddings are `tests`-side hash vectors of the requested dimension. Every request is recorded.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.http_server import serving


@dataclass(frozen=True)
class Failure:
    """One canned failure: an HTTP status (with optional Retry-After) or a hang of `hang` s."""

    status: int = 500
    retry_after: str | None = None
    hang: float = 0.0


class OpenAIFake(ThreadingHTTPServer):
    """The fake's state: queued failures per path, the chat reply, every request received."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.failures: dict[str, list[Failure]] = {}
        self.reply_text: str | None = None
        self.model_replies: dict[str, str] = {}  # a reply per requested model (wins over the rest)
        self.prompt_tokens = 42
        self.completion_tokens = 7
        self.cached_tokens = 0  # reported as usage.prompt_tokens_details.cached_tokens when > 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def fail_next(self, path: str, *failures: Failure) -> None:
        with self.lock:
            self.failures.setdefault(path, []).extend(failures)

    def next_failure(self, path: str) -> Failure | None:
        with self.lock:
            queued = self.failures.get(path) or []
            return queued.pop(0) if queued else None

    def calls(self, path: str) -> list[dict[str, Any]]:
        with self.lock:
            return [body for p, body in self.requests if p == path]

    def answered(self, path: str) -> int:
        """Requests on `path` answered with a 200 (failures are recorded apart)."""
        return len([b for b in self.calls(path) if not b.get("_failed")])


CHAT = "/v1/chat/completions"
EMBEDDINGS = "/v1/embeddings"


class _Handler(BaseHTTPRequestHandler):
    server: OpenAIFake
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        failure = self.server.next_failure(self.path)
        body["_failed"] = failure is not None
        body["_authorization"] = self.headers.get("Authorization", "")
        with self.server.lock:
            self.server.requests.append((self.path, body))
        if failure is not None:
            self._fail(failure)
        elif self.path == CHAT:
            self._send(200, self._chat(body))
        elif self.path == EMBEDDINGS:
            self._send(200, _embeddings(body))
        else:
            self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def _fail(self, failure: Failure) -> None:
        if failure.hang:
            self.server.stopping.wait(failure.hang)
            return
        headers = {"Retry-After": failure.retry_after} if failure.retry_after else {}
        error = {"message": f"fake failure {failure.status}", "type": "server_error"}
        self._send(failure.status, {"error": error}, headers)

    def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
        last_user = next(
            (m["content"] for m in reversed(body.get("messages", [])) if m["role"] == "user"), ""
        )
        text = self.server.model_replies.get(str(body.get("model")), self.server.reply_text)
        if text is None:
            text = f"Eco: {last_user}"
        usage: dict[str, Any] = {
            "prompt_tokens": self.server.prompt_tokens,
            "completion_tokens": self.server.completion_tokens,
            "total_tokens": self.server.prompt_tokens + self.server.completion_tokens,
        }
        if self.server.cached_tokens:
            usage["prompt_tokens_details"] = {"cached_tokens": self.server.cached_tokens}
        return {
            "id": f"chatcmpl-{hashlib.sha1(text.encode()).hexdigest()[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake-model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": usage,
        }

    def _send(self, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        return


def _embeddings(body: dict[str, Any]) -> dict[str, Any]:
    inputs = body.get("input", [])
    texts = [inputs] if isinstance(inputs, str) else list(inputs)
    dimensions = int(body.get("dimensions") or 8)
    data = [
        {"object": "embedding", "index": i, "embedding": _vector(text, dimensions)}
        for i, text in enumerate(texts)
    ]
    tokens = sum(len(text.split()) for text in texts)
    return {
        "object": "list",
        "data": data,
        "model": body.get("model", "fake-embedding"),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _vector(text: str, dimensions: int) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [((digest[i % len(digest)] / 255.0) - 0.5) for i in range(dimensions)]


@contextmanager
def openai_fake() -> Iterator[OpenAIFake]:
    fake = OpenAIFake()
    with serving(fake, "openai-fake", before_stop=fake.stopping.set) as server:
        yield server
