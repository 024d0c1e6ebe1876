"""core.api.negotiation: the JSON short cut answers as DRF's negotiation does, and 406 stays."""

from __future__ import annotations

import pytest
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer, JSONRenderer, TemplateHTMLRenderer
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from core.api.negotiation import JsonFirstNegotiation
from core.models import Organization
from tests.support.api import api_client, error_of

RENDERERS: list[BaseRenderer] = [JSONRenderer(), TemplateHTMLRenderer()]


def chosen(negotiation: DefaultContentNegotiation, path: str, accept: str | None) -> object:
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    request = Request(APIRequestFactory().get(path, **headers))
    try:
        renderer, media_type = negotiation.select_renderer(request, RENDERERS)
    except NotAcceptable:
        return "406"
    return type(renderer).__name__, media_type


@pytest.mark.parametrize(
    "accept",
    [
        None,
        "",
        "*/*",
        " application/json ",
        "text/html",
        "application/json; indent=2",
        "text/html, */*;q=0.1",
        "application/*",
        "application/xml",
    ],
)
@pytest.mark.parametrize("path", ["/api/v1/events", "/api/v1/events?format=html"])
def test_the_short_cut_chooses_what_drf_chooses(accept: str | None, path: str) -> None:
    assert chosen(JsonFirstNegotiation(), path, accept) == chosen(
        DefaultContentNegotiation(), path, accept
    )


@pytest.mark.django_db
def test_an_api_client_that_accepts_no_json_gets_406(org: Organization) -> None:
    client = api_client(org)
    error_of(client.get("/api/v1/events", HTTP_ACCEPT="text/html"), 406, "not_acceptable")
    response = client.get("/api/v1/events", HTTP_ACCEPT="*/*")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"


@pytest.mark.parametrize("accept", [None, "*/*", "application/json"])
def test_a_plain_accept_is_answered_without_parsing_the_header(accept: str | None) -> None:
    class NoParsing(JsonFirstNegotiation):
        def _get_parsed_accept_list(self, request: Request) -> list[str]:
            raise AssertionError("parsed the Accept header")

    assert chosen(NoParsing(), "/api/v1/events", accept) == ("JSONRenderer", "application/json")
