"""Request id: accepted when sane, generated otherwise, returned, bound for the whole request."""

from __future__ import annotations

import logging
import re
from types import SimpleNamespace

import pytest
from django.test import Client

from core import context
from core.logs.filters import CorrelationFilter
from core.models import Organization
from eventbus.store.models import EventLog
from tests.support.api import client_for, issue_key, lead_stage_changed

GENERATED = re.compile(r"[0-9a-f]{32}")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "offered",
    ["abc", "3f2c681b-8281-48ec-9c16-bbe021c83df3", "svc:erp/42@a+b=c.d_e-f", "x" * 128],
)
def test_a_sane_request_id_is_kept(offered: str) -> None:
    response = Client().get("/api/v1/events", HTTP_X_REQUEST_ID=offered)
    assert response["X-Request-ID"] == offered
    assert response.json()["error"]["request_id"] == offered


@pytest.mark.django_db
@pytest.mark.parametrize(
    "offered", ["", " padded", "x" * 129, "new\nline", "<script>", "-leading", "naïve"]
)
def test_an_insane_request_id_is_replaced(offered: str) -> None:
    response = Client().get("/api/v1/events", HTTP_X_REQUEST_ID=offered)
    assert GENERATED.fullmatch(response["X-Request-ID"])


@pytest.mark.django_db
def test_every_response_carries_one_and_they_differ() -> None:
    client = Client()
    ids = {
        client.get(path)["X-Request-ID"]
        for path in ("/api/v1/events", "/api/nothing", "/admin/login/", "/no/such/page")
    }
    assert len(ids) == 4
    assert all(GENERATED.fullmatch(i) for i in ids)


@pytest.mark.django_db
def test_emitted_events_carry_the_request_id(org: Organization) -> None:
    client = client_for(issue_key(org), HTTP_X_REQUEST_ID="trace-me-7")
    assert client.post("/api/v1/events", lead_stage_changed(), format="json").status_code == 201
    assert EventLog.objects.get().metadata["request_id"] == "trace-me-7"
    assert context.current() == {}  # unbound once the request is over


def make_record(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "msg", (), None)
    record.__dict__.update(extra)
    return record


def test_log_records_get_the_bound_correlation_ids() -> None:
    with context.bind(request_id="r-1", actor_id="api_key:dck_x"):
        record = make_record()
        assert CorrelationFilter().filter(record)
    assert (record.request_id, record.actor_id, record.trace_id) == ("r-1", "api_key:dck_x", "-")


def test_log_records_about_a_finished_request_use_its_id() -> None:
    # django.request logs 4xx/5xx after the middleware returned, passing the request along.
    record = make_record(request=SimpleNamespace(request_id="r-2"))
    CorrelationFilter().filter(record)
    assert record.request_id == "r-2"
    unbound = make_record()
    CorrelationFilter().filter(unbound)
    assert unbound.request_id == "-"
