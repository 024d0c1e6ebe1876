"""The API client's reading of the documented headers (Link, Retry-After, x-rate-limit-reset),
the limiter's budget, and the headers it sends (the fake refuses a request without them)."""

from __future__ import annotations

import httpx
import pytest

from nuvemshop.client import NuvemshopClient, TokenInvalid, next_link, wait_seconds
from nuvemshop.models import Store
from nuvemshop.ratelimit import Budget
from tests.support.nuvemshop import FakeNuvemshop, FakeStore, order

LINK = (
    '<https://api.tiendanube.com/v1/123456/products?page=3&per_page=100>; rel="next",\n'
    '  <https://api.tiendanube.com/v1/123456/products?page=50&per_page=100>; rel="last"'
)


def test_next_link_is_read_from_the_link_header() -> None:
    assert next_link(LINK) == "https://api.tiendanube.com/v1/123456/products?page=3&per_page=100"
    assert next_link('<https://x/v1/1/products?page=1>; rel="first"') == ""
    assert next_link("") == ""


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [({"Retry-After": "7"}, 7.0), ({"x-rate-limit-reset": "1500"}, 1.5), ({}, 1.0)],
)
def test_the_wait_after_a_429(headers: dict[str, str], seconds: float) -> None:
    assert wait_seconds(httpx.Response(429, headers=headers)) == seconds


def test_the_budget_keeps_any_window_within_the_limit(settings: object) -> None:
    budget = Budget.configured()  # 300 per 60 s
    assert (budget.burst, budget.rate) == (30, 4.0)
    assert budget.burst + budget.rate * 60 <= 300


@pytest.mark.django_db
def test_every_request_carries_the_documented_headers(
    store: Store, fake: FakeNuvemshop, shop: FakeStore
) -> None:
    shop.orders.extend(order(i, number=i) for i in range(1, 251))
    with NuvemshopClient(store) as api:
        assert len(list(api.pages("orders"))) == 250  # three pages of 100, by the Link URLs
        first = api.page("orders")
        assert (first.total, len(first.items)) == (250, 100)
        assert "page=2" in first.next_url
        assert api.page("customers").items == []  # the API's 404 for an empty listing
    hits = fake.api_hits("/v1/789/orders")
    assert [h.query["page"] for h in hits[:3]] == ["1", "2", "3"]
    assert {h.headers["authentication"] for h in hits} == {"bearer tok-789"}
    assert all(h.headers["user-agent"] for h in hits)


@pytest.mark.django_db
def test_a_refused_token_is_token_invalid(store: Store, shop: FakeStore) -> None:
    shop.token = "new-install"
    with NuvemshopClient(store) as api, pytest.raises(TokenInvalid):
        api.get("store")


@pytest.mark.django_db
def test_an_empty_api_bucket_makes_the_next_request_wait_for_its_reset(
    store: Store, fake: FakeNuvemshop
) -> None:
    fake.rate_remaining, fake.rate_reset_ms = 0, 400
    with NuvemshopClient(store) as api:
        api.get("store")
        api.get("store")
    first, second = fake.api_hits("/store")
    assert second.at - first.at >= 0.35  # no 429 needed: the headers said to wait
