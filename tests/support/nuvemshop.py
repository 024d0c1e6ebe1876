"""A fake Nuvemshop on loopback that follows the documented shapes (api-docs README,
authentication.md, webhook.md, order/product/customer/abandoned_checkout resources).

- `GET /apps/{app_id}/authorize?state=` shows an "accept" page that redirects to the app's
  redirection URL with `code` and `state`; `POST /apps/authorize/token` exchanges the code
  (`client_id`, `client_secret`, `grant_type=authorization_code`) for
  `{access_token, token_type, scope, user_id}`.
- `/v1/{store_id}/...`: `Authentication: bearer <token>` and a `User-Agent` are required (401 /
  400); listings are paginated with `page`/`per_page` (max 200), `Link` (next/last/first/prev)
  and `X-Total-Count`; a page past the last answers 404 "Last page is 0"-style; every answer has
  `X-Rate-Limit-Limit/Remaining/Reset`. `throttle(n)` answers the next n requests 429 with
  Retry-After; `fail(n, status)` fails them.
- `signed(payload)` / `deliver(url, payload)`: a webhook body with its
  `x-linkedstore-hmac-sha256` (HMAC-SHA256 of the raw body with the app secret, hex).
  `notification(store_id, event, id)` is the body webhook.md documents: only `store_id`, `event`
  and the resource's `id`, byte for byte the same on every repeat of an event (a second
  `order/updated` of one order, a second `app/suspended`): no delivery id, no timestamp.
- It records every API request with its arrival time, so tests count requests per window.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import itertools
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

from tests.support.http_server import serving

APP_ID = "4321"
APP_SECRET = "fake-app-secret-for-tests"
MAX_PER_PAGE = 200


@dataclass
class FakeStore:
    store_id: int
    token: str
    name: str = "Loja Teste"
    products: list[dict[str, Any]] = field(default_factory=list)
    customers: list[dict[str, Any]] = field(default_factory=list)
    orders: list[dict[str, Any]] = field(default_factory=list)
    checkouts: list[dict[str, Any]] = field(default_factory=list)
    webhooks: list[dict[str, Any]] = field(default_factory=list)

    def listing(self, resource: str) -> list[dict[str, Any]] | None:
        return {
            "products": self.products,
            "customers": self.customers,
            "orders": self.orders,
            "checkouts": self.checkouts,
            "webhooks": self.webhooks,
        }.get(resource)


@dataclass(frozen=True)
class Hit:
    """One API request as the fake saw it."""

    at: float  # time.monotonic() on arrival
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes


class FakeNuvemshop(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.stores: dict[int, FakeStore] = {}
        self.codes: dict[str, int] = {}  # authorization code -> store id
        self.redirect_url = ""  # the app's "redirection URL" (partner dashboard)
        self.hits: list[Hit] = []
        self.token_requests: list[dict[str, Any]] = []
        self.latency = 0.0
        self.rate_remaining = 39  # what X-Rate-Limit-Remaining says (0: the bucket is full)
        self.rate_reset_ms = 500
        self.lock = threading.Lock()
        self._throttle = 0
        self._throttle_retry_after = 1.0
        self._failures: list[int] = []
        self._ids = itertools.count(9000)

    # -- set-up -------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def settings(self) -> dict[str, Any]:
        """NUVEMSHOP settings pointing the app at this fake."""
        return {
            "APP_ID": APP_ID,
            "CLIENT_SECRET": APP_SECRET,
            "AUTHORIZE_URL": f"{self.base_url}/apps/{{app_id}}/authorize",
            "TOKEN_URL": f"{self.base_url}/apps/authorize/token",
            "API_BASE_URL": f"{self.base_url}/v1",
            "ALLOW_PRIVATE_HOSTS": True,
            "WEBHOOK_BASE_URL": "https://crm.example.com",
        }

    def env(self) -> dict[str, str]:
        """The same, as environment variables for subprocess workers."""
        names = {
            "APP_ID": "NUVEMSHOP_CLIENT_ID",
            "CLIENT_SECRET": "NUVEMSHOP_CLIENT_SECRET",
            "AUTHORIZE_URL": "NUVEMSHOP_AUTHORIZE_URL",
            "TOKEN_URL": "NUVEMSHOP_TOKEN_URL",
            "API_BASE_URL": "NUVEMSHOP_API_BASE_URL",
            "ALLOW_PRIVATE_HOSTS": "NUVEMSHOP_ALLOW_PRIVATE_HOSTS",
            "WEBHOOK_BASE_URL": "NUVEMSHOP_WEBHOOK_BASE_URL",
        }
        return {
            names[k]: str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in self.settings().items()
        }

    def add_store(self, store_id: int = 789, token: str = "tok-789") -> FakeStore:
        store = FakeStore(store_id=store_id, token=token)
        self.stores[store_id] = store
        return store

    def issue_code(self, store_id: int) -> str:
        code = f"code-{next(self._ids)}"
        self.codes[code] = store_id
        return code

    def throttle(self, count: int, retry_after: float = 1.0) -> None:
        with self.lock:
            self._throttle = count
            self._throttle_retry_after = retry_after

    def fail(self, count: int, status: int = 503) -> None:
        with self.lock:
            self._failures.extend([status] * count)

    # -- what happened ------------------------------------------------------------------------
    def api_hits(self, path_part: str = "") -> list[Hit]:
        with self.lock:
            return [h for h in self.hits if path_part in h.path]

    def max_in_window(self, seconds: float) -> int:
        """The most API requests that arrived within any sliding window of `seconds`."""
        times = sorted(h.at for h in self.api_hits())
        best, start = 0, 0
        for end, at in enumerate(times):
            while at - times[start] > seconds:
                start += 1
            best = max(best, end - start + 1)
        return best

    # -- webhooks -----------------------------------------------------------------------------
    @staticmethod
    def signed(payload: dict[str, Any], secret: str = APP_SECRET) -> tuple[bytes, str]:
        body = json.dumps(payload).encode()
        return body, hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()

    def deliver(self, url: str, payload: dict[str, Any]) -> httpx.Response:
        body, signature = self.signed(payload)
        return httpx.post(
            url,
            content=body,
            headers={"Content-Type": "application/json", "x-linkedstore-hmac-sha256": signature},
            timeout=30,
        )

    # -- answers ------------------------------------------------------------------------------
    def next_forced(self) -> tuple[int, float] | None:
        with self.lock:
            if self._throttle > 0:
                self._throttle -= 1
                return 429, self._throttle_retry_after
            if self._failures:
                return self._failures.pop(0), 0.0
        return None


API_PATH = re.compile(r"^/v1/(?P<store>\d+)/(?P<resource>[a-z_]+)(?:/(?P<id>\d+))?/?$")
AUTHORIZE_PATH = re.compile(r"^/apps/(?P<app>[^/]+)/authorize$")


class _Handler(BaseHTTPRequestHandler):
    server: FakeNuvemshop

    def do_GET(self) -> None:
        self._route()

    def do_POST(self) -> None:
        self._route()

    def do_PUT(self) -> None:
        self._route()

    def log_message(self, format: str, *args: object) -> None:
        return

    def _route(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if parts.path == "/apps/authorize/token" and self.command == "POST":
            return self._token(body)
        if (match := AUTHORIZE_PATH.match(parts.path)) and self.command == "GET":
            return self._authorize(query)
        if parts.path == "/accept" and self.command == "GET":
            return self._accept(query)
        if match := API_PATH.match(parts.path):
            return self._api(match, query, body)
        return self._json(404, {"code": 404, "message": "Not Found"})

    # -- OAuth --------------------------------------------------------------------------------
    def _authorize(self, query: dict[str, str]) -> None:
        store_id = next(iter(self.server.stores))
        state = query.get("state", "")
        accept = "/accept?" + urlencode({"state": state, "store": store_id})
        page = (
            "<html><head><title>Nuvemshop - autorizar app</title></head><body>"
            f"<h1>Instalar o app na loja {store_id}</h1>"
            f'<a id="accept" href="{accept}">Aceitar e começar a usar</a></body></html>'
        ).encode()
        self._send(200, page, {"Content-Type": "text/html; charset=utf-8"})

    def _accept(self, query: dict[str, str]) -> None:
        code = self.server.issue_code(int(query["store"]))
        target = f"{self.server.redirect_url}?{urlencode({'code': code, 'state': query['state']})}"
        self._send(302, b"", {"Location": target})

    def _token(self, body: bytes) -> None:
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            data = dict(parse_qs(body.decode()))
        self.server.token_requests.append(data)
        valid = (
            data.get("client_id") == APP_ID
            and data.get("client_secret") == APP_SECRET
            and data.get("grant_type") == "authorization_code"
            and data.get("code") in self.server.codes
        )
        if not valid:
            return self._json(
                400, {"error": "invalid_grant", "error_description": "The code is invalid"}
            )
        store = self.server.stores[self.server.codes.pop(data["code"])]
        self._json(
            200,
            {
                "access_token": store.token,
                "token_type": "bearer",
                "scope": "read_products,read_customers,write_customers,read_orders",
                "user_id": str(store.store_id),
            },
        )

    # -- API ----------------------------------------------------------------------------------
    def _api(self, match: re.Match[str], query: dict[str, str], body: bytes) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        with self.server.lock:
            self.server.hits.append(
                Hit(time.monotonic(), self.command, urlsplit(self.path).path, query, headers, body)
            )
        if self.server.latency:
            time.sleep(self.server.latency)
        store = self.server.stores.get(int(match["store"]))
        if not headers.get("user-agent"):
            return self._json(400, {"error": "User-Agent header is required"})
        if store is None or headers.get("authentication", "") != f"bearer {store.token}":
            return self._json(401, {"code": 401, "message": "Unauthorized"})
        if forced := self.server.next_forced():
            status, retry_after = forced
            extra = {"Retry-After": str(retry_after)} if status == 429 else {}
            return self._json(status, {"code": status, "message": "forced"}, extra)
        resource, item_id = match["resource"], match["id"]
        if resource == "store":
            return self._json(200, {"id": store.store_id, "name": {"pt": store.name}})
        items = store.listing(resource)
        if items is None:
            return self._json(404, {"code": 404, "message": "Not Found"})
        if self.command == "GET" and item_id is None:
            return self._list(store, resource, items, query)
        if self.command == "POST" and item_id is None:
            return self._create(items, body)
        found = next((i for i in items if i["id"] == int(item_id or 0)), None)
        if found is None:
            return self._json(404, {"code": 404, "message": "Not Found"})
        if self.command == "PUT":
            found.update(json.loads(body or b"{}"))
        return self._json(200, found)

    def _list(
        self, store: FakeStore, resource: str, items: list[dict[str, Any]], query: dict[str, str]
    ) -> None:
        selected = [i for i in items if _matches(i, query)]
        per_page = min(int(query.get("per_page", 30)), MAX_PER_PAGE)
        page = int(query.get("page", 1))
        last = max(1, -(-len(selected) // per_page))
        chunk = selected[(page - 1) * per_page : page * per_page]
        if not chunk:
            return self._json(
                404,
                {
                    "code": 404,
                    "message": "Not Found",
                    "description": f"Last page is {last if selected else 0}",
                },
            )
        base = f"{self.server.base_url}/v1/{store.store_id}/{resource}"
        rels = {"first": 1, "last": last}
        if page < last:
            rels["next"] = page + 1
        if page > 1:
            rels["prev"] = page - 1
        link = ", ".join(
            f'<{base}?{urlencode({**query, "page": n, "per_page": per_page})}>; rel="{rel}"'
            for rel, n in rels.items()
        )
        self._json(200, chunk, {"Link": link, "X-Total-Count": str(len(selected))})

    def _create(self, items: list[dict[str, Any]], body: bytes) -> None:
        data = json.loads(body or b"{}")
        item = {"id": next(self.server._ids), "created_at": "2026-12-01T10:00:00-03:00", **data}
        items.append(item)
        self._json(201, item)

    # -- plumbing -----------------------------------------------------------------------------
    def _json(self, status: int, data: Any, extra: dict[str, str] | None = None) -> None:
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "X-Rate-Limit-Limit": "40",
            "X-Rate-Limit-Remaining": "39",
            "X-Rate-Limit-Reset": "500",
            **(extra or {}),
        }
        if self.path.startswith("/v1/"):
            headers["X-Rate-Limit-Remaining"] = str(self.server.rate_remaining)
            headers["X-Rate-Limit-Reset"] = str(self.server.rate_reset_ms)
        self._send(status, json.dumps(data).encode(), headers)

    def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _matches(item: dict[str, Any], query: dict[str, str]) -> bool:
    if "event" in query and item.get("event") != query["event"]:
        return False
    if "created_at_min" not in query:
        return True
    # Compared as instants, as the API does: the client sends UTC, the resources carry -03:00.
    created = dt.datetime.fromisoformat(str(item["created_at"]))
    return created >= dt.datetime.fromisoformat(query["created_at_min"])


@contextmanager
def fake_nuvemshop() -> Iterator[FakeNuvemshop]:
    with serving(FakeNuvemshop(), "fake-nuvemshop") as server:
        yield server


def notification(store_id: int, event: str, resource_id: int) -> dict[str, Any]:
    """A store webhook's body as the shop sends it (webhook.md, "Parameters")."""
    return {"store_id": store_id, "event": event, "id": resource_id}


# -- documented resource shapes (the fields the CRM reads, as the docs show them) --------------
def customer(ns_id: int, *, email: str = "", phone: str = "", name: str = "") -> dict[str, Any]:
    return {
        "id": ns_id,
        "name": name or f"Cliente {ns_id}",
        "email": email or f"cliente{ns_id}@example.com",
        "phone": phone or f"+55119{ns_id:08d}"[:14],
        "identification": "",
        "created_at": "2026-11-01T10:00:00-03:00",
        "updated_at": "2026-11-01T10:00:00-03:00",
    }


def product(ns_id: int, *, name: str = "", price: str = "19.90") -> dict[str, Any]:
    return {
        "id": ns_id,
        "name": {"pt": name or f"Produto {ns_id}"},
        "description": {"pt": f"<p>Descrição do produto {ns_id}</p>"},
        "handle": {"pt": f"produto-{ns_id}"},
        "canonical_url": f"https://loja.example.com/produtos/produto-{ns_id}/",
        "published": True,
        "variants": [{"id": ns_id * 10, "price": price, "stock": 5, "sku": f"SKU-{ns_id}"}],
        "created_at": "2026-11-01T10:00:00-03:00",
        "updated_at": "2026-11-02T10:00:00-03:00",
    }


def order(
    ns_id: int,
    *,
    number: int,
    buyer: dict[str, Any] | None = None,
    total: str = "58.00",
    payment_status: str = "pending",
) -> dict[str, Any]:
    return {
        "id": ns_id,
        "number": number,
        "status": "open",
        "payment_status": payment_status,
        "shipping_status": "unpacked",
        "currency": "BRL",
        "total": total,
        "subtotal": total,
        "customer": buyer,
        "products": [{"product_id": 1234, "name": "Produto", "price": total, "quantity": 1}],
        "paid_at": "2026-12-01T10:05:00-03:00" if payment_status == "paid" else None,
        "cancelled_at": None,
        "shipped_at": None,
        "cancel_reason": None,
        "shipping_tracking_number": None,
        "created_at": "2026-12-01T10:00:00-03:00",
        "updated_at": "2026-12-01T10:00:00-03:00",
    }


def checkout(ns_id: int, *, email: str, total: str = "120.00") -> dict[str, Any]:
    return {
        "id": ns_id,
        "token": f"tok{ns_id}",
        "contact_email": email,
        "contact_name": "Cliente",
        "contact_phone": "",
        "total": total,
        "currency": "BRL",
        "abandoned_checkout_url": f"https://loja.example.com/checkout/{ns_id}",
        "created_at": "2026-12-01T09:00:00-03:00",
        "updated_at": "2026-12-01T09:30:00-03:00",
    }
