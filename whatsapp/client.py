"""A client of WAHA's documented HTTP API (the few calls Deskcomm makes).

- `POST /api/sendText` {session, chatId, text}; `POST /api/sendImage` / `POST /api/sendFile`
  {session, chatId, file: {mimetype, filename, url}, caption}: the sent message, whose `id` is
  WAHA's message id ("true_5511...@c.us_3EB0...").
- `GET /api/sessions?all=true`: [{name, status, ...}] (status STOPPED, STARTING, SCAN_QR_CODE,
  WORKING, FAILED).
- `GET /api/{session}/chats/{chatId}/messages?limit=N&downloadMedia=false`: the chat's latest
  messages, newest first, each with `id`, `timestamp` (Unix seconds), `fromMe` and `body`.
- `GET /api/{session}/lids/{lid}`: {lid, pn}: the phone chat id behind a privacy id, or null.

Every request goes through `core.http.guarded_client` (SSRF guard, no redirects, timeouts) and
carries the session's key in `X-Api-Key`. Failures are a `WahaError` that says whether a retry
can succeed (`retryable`): 429, 5xx, timeouts and connection errors can; other 4xx (an invalid
chat id, an unknown or logged-out session, a wrong key) cannot.
"""

from __future__ import annotations

import mimetypes
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from whatsapp.conf import whatsapp_settings

if TYPE_CHECKING:
    import httpx

# httpx and core.http (~11 MB) are imported where a client is built or a call is made: the
# admin, the services and the send consumer import this module in every process.

ALLOW_PRIVATE_SETTING = "WAHA_ALLOW_PRIVATE_TARGETS"


class WahaError(Exception):
    """A WAHA call that did not succeed. `retryable`: a later try may; `code`: a short tag."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        # True when WAHA answered and so certainly did not accept the request (4xx, 429).
        self.refused = status is not None and status < 500


@dataclass(frozen=True)
class SentMessage:
    id: str
    timestamp: int | None = None


@dataclass(frozen=True)
class Target:
    """Where and as whom to call WAHA: its base URL, the session name and its API key."""

    base_url: str
    session: str
    api_key: str


def build_client() -> httpx.Client:
    import httpx

    from core.http import guarded_client

    return guarded_client(
        timeout=httpx.Timeout(
            whatsapp_settings.TIMEOUT,
            connect=min(whatsapp_settings.CONNECT_TIMEOUT, whatsapp_settings.TIMEOUT),
        ),
        allow_private=whatsapp_settings.ALLOW_PRIVATE_TARGETS,
        allow_private_setting=ALLOW_PRIVATE_SETTING,
        max_connections=20,
    )


@contextmanager
def waha_client() -> Iterator[httpx.Client]:
    """A client for one unit of work (a send and its lookup, one sync run), closed after it."""
    client = build_client()
    try:
        yield client
    finally:
        client.close()


_shared: dict[tuple[object, ...], httpx.Client] = {}
_shared_lock = threading.Lock()


@contextmanager
def send_client() -> Iterator[httpx.Client]:
    """The send worker's client, shared by the process's handler threads (httpx clients are
    thread-safe) and kept across sends: building one costs two TLS contexts (~75 ms) and a
    fresh connection. Rebuilt when the knobs change."""
    knobs = (
        whatsapp_settings.TIMEOUT,
        whatsapp_settings.CONNECT_TIMEOUT,
        whatsapp_settings.ALLOW_PRIVATE_TARGETS,
    )
    with _shared_lock:
        client = _shared.get(knobs)
        if client is None:
            for stale in _shared.values():
                stale.close()
            _shared.clear()
            client = _shared[knobs] = build_client()
    yield client


def close_send_client() -> None:
    """Close the shared send client (tests, once their fake server stops)."""
    with _shared_lock:
        for client in _shared.values():
            client.close()
        _shared.clear()


def chat_id_for(phone: str) -> str:
    """WhatsApp's chat id of a phone number: its digits and "@c.us"."""
    digits = "".join(ch for ch in phone if ch.isdigit())
    if not digits:
        raise WahaError("the contact has no phone number", code="no_chat_id", retryable=False)
    return f"{digits}@c.us"


# WhatsApp's user server under its two spellings: WEBJS and WAHA's webhooks say "c.us", the
# NOWEB/GOWS protocol layer (Baileys, whatsmeow) "s.whatsapp.net".
USER_SERVER = "@c.us"
PROTOCOL_USER_SERVER = "@s.whatsapp.net"


def normalize_chat_id(chat_id: str) -> str:
    """One spelling of a person's chat id: "5511...@s.whatsapp.net" is "5511...@c.us"."""
    if chat_id.endswith(PROTOCOL_USER_SERVER):
        return chat_id[: -len(PROTOCOL_USER_SERVER)] + USER_SERVER
    return chat_id


def normalize_message_id(message_id: str) -> str:
    """WAHA's serialized message id `{fromMe}_{chatId}_{key}[_{participant}]` with its chat ids
    in one spelling (`normalize_chat_id`), whichever engine wrote it: NOWEB answers a send with
    `true_5511...@s.whatsapp.net_3EB0...` and acks it as `true_5511...@c.us_3EB0...`. Anything
    else (a bare key) is returned as it is."""
    parts = message_id.split("_")
    if len(parts) < 3 or parts[0] not in ("true", "false"):
        return message_id
    return "_".join([parts[0], *(normalize_chat_id(p) for p in parts[1:])])


def message_key(message_id: str) -> str:
    """WhatsApp's own id of a message (the `key.id`: "3EB0..."), the part of WAHA's serialized
    id that no engine rewrites; a bare id is its own key."""
    parts = message_id.split("_")
    if len(parts) >= 3 and parts[0] in ("true", "false"):
        return parts[2]
    return message_id


def message_id_of(answer: object) -> str:
    """WAHA's message id in a send's answer, normalized (`normalize_message_id`): `id` as a
    string (WAMessage, GOWS), `id._serialized` (WEBJS), or the NOWEB key ({key: {remoteJid,
    fromMe, id}})."""
    if isinstance(answer, Mapping):
        ident = answer.get("id")
        if isinstance(ident, str) and ident:
            return normalize_message_id(ident)
        if isinstance(ident, Mapping) and isinstance(ident.get("_serialized"), str):
            return normalize_message_id(str(ident["_serialized"]))
        key = answer.get("key")
        if isinstance(key, Mapping) and key.get("id"):
            remote = str(key.get("remoteJid") or "")
            mine = "true" if key.get("fromMe") else "false"
            return normalize_message_id(f"{mine}_{remote}_{key['id']}")
    raise WahaError("WAHA's answer carries no message id", code="bad_answer", retryable=True)


def send_text(client: httpx.Client, target: Target, chat_id: str, text: str) -> SentMessage:
    answer = _call(
        client,
        target,
        "POST",
        "/api/sendText",
        json={"session": target.session, "chatId": chat_id, "text": text},
    )
    return SentMessage(message_id_of(answer), _timestamp(answer))


def send_media(
    client: httpx.Client, target: Target, chat_id: str, url: str, caption: str
) -> SentMessage:
    """An image (`sendImage`) or any other file (`sendFile`) by URL, with the text as caption."""
    mimetype = mimetypes.guess_type(url.split("?", 1)[0])[0] or "application/octet-stream"
    filename = url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1] or "file"
    path = "/api/sendImage" if mimetype.startswith("image/") else "/api/sendFile"
    body: dict[str, Any] = {
        "session": target.session,
        "chatId": chat_id,
        "file": {"mimetype": mimetype, "filename": filename, "url": url},
        "caption": caption,
    }
    answer = _call(client, target, "POST", path, json=body)
    return SentMessage(message_id_of(answer), _timestamp(answer))


def sessions(client: httpx.Client, base_url: str, api_key: str) -> list[dict[str, Any]]:
    """Every session WAHA knows (`GET /api/sessions?all=true`)."""
    answer = _call(
        client, Target(base_url, "", api_key), "GET", "/api/sessions", params={"all": "true"}
    )
    if not isinstance(answer, list):
        raise WahaError(
            "GET /api/sessions did not answer a list", code="bad_answer", retryable=True
        )
    return [item for item in answer if isinstance(item, dict)]


def chat_messages(
    client: httpx.Client, target: Target, chat_id: str, *, limit: int
) -> list[dict[str, Any]]:
    """The chat's latest `limit` messages, without downloading media."""
    path = f"/api/{quote(target.session, safe='')}/chats/{quote(chat_id, safe='@.')}/messages"
    answer = _call(
        client, target, "GET", path, params={"limit": str(limit), "downloadMedia": "false"}
    )
    if not isinstance(answer, list):
        raise WahaError("chat messages did not answer a list", code="bad_answer", retryable=True)
    return [item for item in answer if isinstance(item, dict)]


def lid_phone(client: httpx.Client, target: Target, lid: str) -> str | None:
    """The phone chat id ("5511...@c.us") WAHA knows for a privacy id ("<n>@lid"), or None
    (`GET /api/{session}/lids/{lid}` answers {lid, pn}; pn is null for an unknown lid)."""
    path = f"/api/{quote(target.session, safe='')}/lids/{quote(lid, safe='@')}"
    answer = _call(client, target, "GET", path)
    pn = answer.get("pn") if isinstance(answer, Mapping) else None
    return normalize_chat_id(pn) if isinstance(pn, str) and pn.split("@", 1)[0].isdigit() else None


def _call(
    client: httpx.Client,
    target: Target,
    method: str,
    path: str,
    *,
    json: dict[str, Any] | None = None,
    params: dict[str, str] | None = None,
) -> Any:
    if not target.base_url:
        raise WahaError(
            "no WAHA base URL: set the session's or WAHA_BASE_URL",
            code="not_configured",
            retryable=False,
        )
    import httpx

    headers = {"Accept": "application/json"}
    if target.api_key:
        headers["X-Api-Key"] = target.api_key
    try:
        response = client.request(
            method, f"{target.base_url}{path}", json=json, params=params, headers=headers
        )
    except httpx.TimeoutException as exc:
        raise WahaError(
            f"WAHA timed out: {type(exc).__name__}", code="timeout", retryable=True
        ) from None
    except httpx.HTTPError as exc:
        blocked = type(exc).__name__ == "BlockedDestination"
        raise WahaError(
            f"WAHA unreachable: {type(exc).__name__}: {exc}",
            code="blocked" if blocked else "unreachable",
            retryable=not blocked,
        ) from None
    if response.status_code >= 300:
        raise _status_error(response)
    try:
        return response.json()
    except ValueError:
        raise WahaError("WAHA answered no JSON", code="bad_answer", retryable=True) from None


def _status_error(response: httpx.Response) -> WahaError:
    from core.http import retry_after_seconds

    status = response.status_code
    detail = response.text[:300]
    if status == 429 or status >= 500:
        return WahaError(
            f"WAHA answered {status}: {detail}",
            code="rate_limited" if status == 429 else f"http_{status}",
            retryable=True,
            status=status,
            retry_after=retry_after_seconds(response.headers.get("retry-after")),
        )
    # 400 (invalid chat id...), 401/403 (key), 404 (no such session), 422 (session not working,
    # e.g. logged out): the same request cannot succeed later.
    return WahaError(
        f"WAHA answered {status}: {detail}", code=f"http_{status}", retryable=False, status=status
    )


def _timestamp(answer: object) -> int | None:
    if isinstance(answer, Mapping):
        for key in ("timestamp", "messageTimestamp"):
            value = answer.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return int(value)
    return None
