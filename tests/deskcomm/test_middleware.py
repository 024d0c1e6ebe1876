"""Every web request gets a request id: bound for the request, returned in X-Request-ID."""

from __future__ import annotations

import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_a_fresh_id_is_returned(client: Client) -> None:
    first = client.get("/admin/login/")["X-Request-ID"]
    second = client.get("/admin/login/")["X-Request-ID"]
    assert re.fullmatch(r"[0-9a-f]{32}", first) and first != second


def test_a_well_formed_incoming_id_is_kept(client: Client) -> None:
    response = client.get("/admin/login/", HTTP_X_REQUEST_ID="lb-7f3a:9c2e-0001")
    assert response["X-Request-ID"] == "lb-7f3a:9c2e-0001"


@pytest.mark.parametrize("sent", ["<script>x</script>", "short", "x" * 101, "a b c d e f g h"])
def test_a_malformed_incoming_id_is_replaced(client: Client, sent: str) -> None:
    returned = client.get("/admin/login/", HTTP_X_REQUEST_ID=sent)["X-Request-ID"]
    assert returned != sent and re.fullmatch(r"[0-9a-f]{32}", returned)
