"""Read-only mode for a database outage (seed 001 §13.2), switched by READ_ONLY_MODE.

While it is on, nothing in a request touches the database:

- the inbound webhook receivers (READ_ONLY_BUFFERED_VIEWS: WAHA's and Nuvemshop's) write the raw
  request (path, the signature headers, body, arrival time) as one file under
  READ_ONLY_BUFFER_ROOT and answer 200, so the senders do not pile up retries; the signature is
  checked when the request is replayed, by the receiver itself;
- every other write to the API (POST, PUT, PATCH, DELETE under /api/, sends included) answers
  503 with Retry-After; reads are served as the database allows.

Once the database is back and READ_ONLY_MODE off, `replay_buffer` (the every-minute
`read-only-buffer-replay` job, or `manage.py replay_read_only_buffer`) hands each buffered request
to its receiver in arrival order: answered (2xx, or 4xx: a bad signature is the receiver's to
refuse, and the file moves to `rejected/`) it is deleted; a 5xx or an exception keeps it (and
the ones after it) for the next run. The receivers are idempotent by the sender's ids.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve

from core import rls

logger = logging.getLogger(__name__)

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# What a receiver needs again at replay (its signature); nothing else of the request is kept.
KEPT_HEADERS = ("Content-Type", "X-Webhook-Hmac", "X-Webhook-Hmac-Algorithm",
                "X-Linkedstore-Hmac-Sha256")  # fmt: skip
RETRY_AFTER_SECONDS = 60
REJECTED = "rejected"


def buffer_root() -> Path:
    return Path(str(settings.READ_ONLY_BUFFER_ROOT))


class ReadOnlyModeMiddleware:
    """Before sessions, auth and views: in read-only mode no request reaches the database."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not settings.READ_ONLY_MODE or request.method not in WRITE_METHODS:
            return self.get_response(request)
        try:
            name = resolve(request.path_info).url_name
        except Resolver404:
            return self.get_response(request)
        if name in settings.READ_ONLY_BUFFERED_VIEWS:
            buffer_request(request)
            return JsonResponse({"status": "buffered"}, status=200)
        if request.path_info.startswith("/api/"):
            refused = JsonResponse(
                {"error": "read-only mode: the database is under maintenance; retry later"},
                status=503,
            )
            refused["Retry-After"] = str(RETRY_AFTER_SECONDS)
            return refused
        return self.get_response(request)


def buffer_request(request: HttpRequest) -> Path:
    """Write the request as one file, named so that names sort in arrival order."""
    root = buffer_root()
    root.mkdir(parents=True, exist_ok=True)
    record = {
        "path": request.path_info,
        "received_at": time.time(),
        "headers": {h: request.headers[h] for h in KEPT_HEADERS if h in request.headers},
        "body": base64.b64encode(request.body).decode(),
    }
    name = f"{time.time_ns():020d}-{uuid.uuid4().hex}.json"
    partial = root / f".{name}.partial"
    partial.write_text(json.dumps(record))
    os.replace(partial, root / name)  # never a half-written file under its final name
    return root / name


@dataclass
class Replayed:
    delivered: int = 0
    rejected: int = 0
    left: int = 0


def replay_buffer() -> Replayed:
    """Hand the buffered requests to their receivers, oldest first (not in read-only mode)."""
    from django.test import RequestFactory  # builds a plain HttpRequest; nothing test-only

    result = Replayed()
    root = buffer_root()
    if settings.READ_ONLY_MODE or not root.is_dir():
        result.left = len(list(root.glob("*.json"))) if root.is_dir() else 0
        return result
    files = sorted(root.glob("*.json"))
    factory = RequestFactory()
    for index, path in enumerate(files):
        record = json.loads(path.read_text())
        headers = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in record["headers"].items()}
        headers.pop("HTTP_CONTENT_TYPE", None)
        request = factory.post(
            record["path"], data=base64.b64decode(record["body"]),
            content_type=record["headers"].get("Content-Type", "application/json"), **headers,
        )  # fmt: skip
        match = resolve(record["path"])
        try:
            response = match.func(request, **match.kwargs)
        except Exception:
            logger.exception("read-only buffer: replaying %s failed; kept", path.name)
            response = None
        finally:
            rls.reset_scope()  # the receiver scoped the session as a request would: undo it
        if response is None or response.status_code >= 500:
            result.left = len(files) - index
            break
        if response.status_code >= 400:
            (root / REJECTED).mkdir(exist_ok=True)
            os.replace(path, root / REJECTED / path.name)
            logger.warning(
                "read-only buffer: %s refused it (HTTP %d); moved to %s/",
                record["path"], response.status_code, REJECTED,
            )  # fmt: skip
            result.rejected += 1
        else:
            path.unlink()
            result.delivered += 1
    return result
