"""A client of Nuvemshop's documented REST API (`/v1/{store_id}/...`), one store at a time.

Every request: `Authentication: bearer <token>` and the `User-Agent` naming the app and a
contact (the docs' headers), through the SSRF-guarded client, after a token from the shared
per-store limiter (nuvemshop.ratelimit). A 429 blocks the store for its Retry-After (or
`x-rate-limit-reset`, milliseconds) and the request is tried again; a 401 means the token was
revoked or the app uninstalled (`TokenInvalid`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nuvemshop import ratelimit
from nuvemshop.conf import nuvemshop_settings
from nuvemshop.metrics import API_REQUESTS, count_response
from nuvemshop.models import Store

if TYPE_CHECKING:
    import httpx

# httpx and core.http (~11 MB) are imported where a client is built or a request is sent: the
# services and the consumers import this module in every process, drain workers included.

logger = logging.getLogger(__name__)

THROTTLE_RETRIES = 5
ALLOW_PRIVATE_SETTING = "NUVEMSHOP_ALLOW_PRIVATE_HOSTS"


class NuvemshopError(Exception):
    """The API failed (5xx, network, unexpected answer): transient, retried by the bus."""


class TokenInvalid(NuvemshopError):
    """401: the access token no longer works (revoked, app uninstalled). Reinstall."""


class NotFound(NuvemshopError):
    """404: the resource is gone from the store."""


@dataclass(frozen=True)
class Page:
    """One page of a listing: its items, the `rel="next"` URL (empty on the last) and the total."""

    items: list[dict[str, Any]]
    next_url: str
    total: int | None


def http_client() -> httpx.Client:
    """The outbound client for Nuvemshop hosts (SSRF guard; private hosts only if allowed)."""
    import httpx

    from core.http import guarded_client

    return guarded_client(
        timeout=httpx.Timeout(
            nuvemshop_settings.TIMEOUT, connect=nuvemshop_settings.CONNECT_TIMEOUT
        ),
        allow_private=nuvemshop_settings.ALLOW_PRIVATE_HOSTS,
        allow_private_setting=ALLOW_PRIVATE_SETTING,
    )


def api_headers(token: str) -> dict[str, str]:
    return {
        "Authentication": f"bearer {token}",
        "User-Agent": nuvemshop_settings.USER_AGENT,
        "Content-Type": "application/json; charset=utf-8",
    }


def next_link(header: str) -> str:
    """The `rel="next"` URL of a `Link` header ("" when there is none)."""
    for part in header.split(","):
        url, _, params = part.partition(";")
        if 'rel="next"' in params.replace(" ", ""):
            return url.strip().strip("<>")
    return ""


def wait_seconds(response: httpx.Response) -> float:
    """How long a throttled store waits: Retry-After, else x-rate-limit-reset (milliseconds),
    else one second (at least 50 ms)."""
    from core.http import retry_after_seconds

    retry_after = retry_after_seconds(response.headers.get("retry-after"))
    if retry_after is not None:
        return max(retry_after, 0.05)
    try:
        return max(float(response.headers.get("x-rate-limit-reset", "")) / 1000, 0.05)
    except ValueError:
        return 1.0


class NuvemshopClient:
    """The API of one store (its id and decrypted token), rate-limited across processes."""

    def __init__(self, store: Store, client: httpx.Client | None = None) -> None:
        self.store = store
        self.base = f"{nuvemshop_settings.API_BASE_URL.rstrip('/')}/{store.ns_store_id}"
        self._client = client or http_client()
        self._headers = api_headers(store.access_token)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> NuvemshopClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def url(self, path: str) -> str:
        return f"{self.base}/{path.lstrip('/')}"

    def request(self, method: str, url: str, *, json: Any = None, params: Any = None) -> Any:
        """Send one request (waiting for the shared limiter and any 429); the JSON answer."""
        return self.request_response(method, url, json=json, params=params).json()

    def request_response(
        self, method: str, url: str, *, json: Any = None, params: Any = None
    ) -> httpx.Response:
        import httpx

        for _ in range(THROTTLE_RETRIES):
            ratelimit.acquire(self.store.ns_store_id)
            try:
                response = self._client.request(
                    method, url, json=json, params=params, headers=self._headers
                )
            except httpx.HTTPError as error:
                API_REQUESTS.labels("error").inc()
                raise NuvemshopError(f"{method} {url}: {error}") from error
            count_response(response.status_code)
            if response.status_code != 429:
                self._respect_bucket(response)
                return self._checked(method, url, response)
            ratelimit.block(self.store.ns_store_id, wait_seconds(response))
        raise NuvemshopError(f"{method} {url}: still throttled after {THROTTLE_RETRIES} tries")

    def _respect_bucket(self, response: httpx.Response) -> None:
        """The API's own bucket is empty (`x-rate-limit-remaining: 0`): every process of the
        store waits until it has drained (`x-rate-limit-reset`, milliseconds) instead of a 429."""
        if response.headers.get("x-rate-limit-remaining") == "0":
            ratelimit.block(self.store.ns_store_id, wait_seconds(response))

    def _checked(self, method: str, url: str, response: httpx.Response) -> httpx.Response:
        if response.status_code == 401:
            raise TokenInvalid(f"{method} {url}: 401 (token revoked or app uninstalled)")
        if response.status_code == 404:
            raise NotFound(f"{method} {url}: 404")
        if response.status_code >= 400:
            raise NuvemshopError(f"{method} {url}: {response.status_code} {response.text[:200]}")
        return response

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", self.url(path), params=params or None)

    def page(self, resource: str, next_url: str = "") -> Page:
        """The first page of `resource` (PER_PAGE items), or the page at a `Link` next URL."""
        params = None if next_url else {"page": 1, "per_page": nuvemshop_settings.PER_PAGE}
        try:
            response = self.request_response("GET", next_url or self.url(resource), params=params)
        except NotFound:  # the API answers an empty listing with 404 ("Last page is 0")
            return Page(items=[], next_url="", total=0)
        total = response.headers.get("x-total-count")
        return Page(
            items=list(response.json()),
            next_url=next_link(response.headers.get("link", "")),
            total=int(total) if total and total.isdigit() else None,
        )

    def pages(self, resource: str, **params: Any) -> Iterator[dict[str, Any]]:
        """Every item of a listing, following the `Link` next URLs."""
        query = {"page": 1, "per_page": nuvemshop_settings.PER_PAGE, **params}
        try:
            response = self.request_response("GET", self.url(resource), params=query)
        except NotFound:  # an empty listing
            return
        while True:
            yield from response.json()
            following = next_link(response.headers.get("link", ""))
            if not following:
                return
            response = self.request_response("GET", following)
