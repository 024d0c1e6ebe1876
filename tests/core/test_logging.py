"""JSON log lines carry the context fields; no personal data or secret survives formatting."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings

import eventbus
from core import context
from core.api.throttling import ApiKeyRateThrottle
from core.logs.filters import CorrelationFilter, RedactionFilter
from core.logs.formatters import JsonFormatter, service_name
from core.models import Organization
from core.redaction import REDACTED, redact
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store.models import Delivery
from eventbus.store.registry import make_consumer, registry
from tests.support.api import api_client
from tests.support.pii import KEYED_SECRETS, PII_SAMPLES, leaked
from tests.support.processes import REPO, subprocess_env


@pytest.fixture
def json_log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger writing through the console handler's filters and formatter, in JSON."""
    console = settings.LOGGING["handlers"]["console"]
    assert console["filters"] == ["correlation", "redaction"]
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(settings.LOGGING["formatters"]["json"]["format"]))
    handler.addFilter(CorrelationFilter())
    handler.addFilter(RedactionFilter())
    logger = logging.getLogger("tests.logging")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield logger, stream
    finally:
        logger.removeHandler(handler)


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_line_is_json_with_the_context_fields(
    json_log: tuple[logging.Logger, io.StringIO], monkeypatch: pytest.MonkeyPatch
) -> None:
    logger, stream = json_log
    with (
        context.bind(request_id="req-1"),
        context.bind_log(organization_id="org-9", event_id="ev-1", delivery_id=42, consumer="c1"),
    ):
        logger.info("handled %d item(s)", 3, extra={"attempt": 2})
    (line,) = lines(stream)
    assert line["message"] == "handled 3 item(s)"
    assert line["level"] == "INFO" and line["logger"] == "tests.logging"
    assert str(line["time"]).endswith("Z")
    assert {"service", "commit"} <= set(line)
    assert line["request_id"] == "req-1" and line["organization_id"] == "org-9"
    assert (line["event_id"], line["delivery_id"], line["consumer"]) == ("ev-1", "42", "c1")
    assert line["attempt"] == 2


def test_unbound_ids_are_absent_not_placeholders(
    json_log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = json_log
    logger.warning("no context")
    (line,) = lines(stream)
    assert "request_id" not in line and "organization_id" not in line


def test_no_personal_data_survives_in_message_args_extras_or_traceback(
    json_log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = json_log
    for sample in PII_SAMPLES:
        logger.info("contact said " + sample)
        logger.info("arg %s and %r", sample, {"note": sample})
        logger.info("extras", extra={"payload": {"text": sample, **KEYED_SECRETS}})
    logger.info("headers %s", KEYED_SECRETS)
    try:
        raise ValueError("bad contact " + " ".join(PII_SAMPLES))
    except ValueError:
        logger.exception("failed")
    output = stream.getvalue()
    assert leaked(output) == [], output
    assert REDACTED in output and "[CPF]" in output and "[EMAIL]" in output
    assert all(isinstance(line, dict) for line in lines(stream))


def test_redaction_keeps_ordinary_values() -> None:
    data = {"event_type": "lead.created", "count": 3, "id": "0b7c1e9a-2f34-4c1d-9e51-6a7b8c9d0e1f"}
    assert redact(data) == data
    assert redact({"contact_email": "a"}) == {"contact_email": REDACTED}
    # Digit runs inside ids and timestamps are not phones or CPFs.
    for ordinary in (
        "event 84e77c97-6244-4081-b71d-570b5e3f253f",
        "at 2026-11-29T09:20:30.473Z",
        "hex a12345678901 and 5511912345678abc",
    ):
        assert redact(ordinary) == ordinary
    assert redact("tel:(11) 91234-5678, cpf=123.456.789-09.") == "tel:[PHONE], cpf=[CPF]."


@pytest.mark.parametrize(
    "host",
    [
        "connect to http://1198765432:8080/health failed",
        "postgres://deskcomm@12345678901:5432/deskcomm",
        "resolving 11987654321.internal",
        "https://5511912345678.svc.cluster.local/hook",
    ],
)
def test_digit_only_host_names_are_not_phones_or_cpfs(host: str) -> None:
    assert redact(host) == host


def test_numbers_in_paths_and_sentences_are_still_redacted() -> None:
    assert redact("GET /contacts/11987654321") == "GET /contacts/[CPF]"
    assert redact("ligue 11 91234-5678.") == "ligue [PHONE]."
    assert redact("https://x.example/c/(11) 91234-5678") == "https://x.example/c/[PHONE]"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["/venv/bin/gunicorn", "deskcomm.wsgi"], "web"),
        (["/venv/lib/python3.11/site-packages/gunicorn/__main__.py", "deskcomm.wsgi"], "web"),
        (["manage.py", "drain_events", "--once"], "drain_events"),
    ],
)
def test_service_is_derived_from_the_command(argv: list[str], expected: str) -> None:
    assert service_name(argv) == expected


def test_a_management_command_logs_json_lines_on_stdout() -> None:
    env = subprocess_env(DESKCOMM_SERVICE="", GIT_COMMIT="abc123", LOG_FORMAT="json")
    code = (
        "import django, logging; django.setup(); "
        "logging.getLogger('probe').warning('mail maria.silva@example.com.br')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = json.loads(result.stdout.strip().splitlines()[-1])
    assert line["commit"] == "abc123" and line["level"] == "WARNING"
    assert line["message"] == "mail [EMAIL]"


@pytest.mark.django_db
def test_an_api_request_binds_its_tenant_for_the_rest_of_the_request(
    org: Organization, json_log: tuple[logging.Logger, io.StringIO], monkeypatch: pytest.MonkeyPatch
) -> None:
    logger, stream = json_log
    original = ApiKeyRateThrottle.allow_request

    def logging_throttle(self: ApiKeyRateThrottle, request: Any, view: Any) -> bool:
        logger.info("throttle consulted")  # runs after authentication, inside the view
        return original(self, request, view)

    monkeypatch.setattr(ApiKeyRateThrottle, "allow_request", logging_throttle)
    response = api_client(org, "events:read").get("/api/v1/events", HTTP_X_REQUEST_ID="req-77")
    assert response.status_code == 200
    (line,) = lines(stream)
    assert line["organization_id"] == str(org.id) and line["request_id"] == "req-77"
    assert context.current_log() == {}  # unbound after the request


@pytest.mark.django_db(transaction=True)
def test_a_handler_run_binds_its_event_and_delivery(
    org: Organization, json_log: tuple[logging.Logger, io.StringIO]
) -> None:
    logger, stream = json_log

    def handler(event: eventbus.Event) -> None:
        logger.info("handling")

    with registry.temporarily(make_consumer("log-probe-worker", handler, events=["test.job"])):
        event = eventbus.emit("test.job", organization=org, entity_kind="t", payload={"n": 1})
        Worker(WorkerOptions(consumers=["log-probe-worker"], listen=False)).run_once()
    (line,) = lines(stream)
    delivery = Delivery.objects.get(event_id=event.id)
    assert line["event_id"] == str(event.id) and line["delivery_id"] == str(delivery.id)
    assert line["consumer"] == "log-probe-worker" and line["organization_id"] == str(org.id)


def test_a_handler_run_scope_binds_both_contexts_and_restores_them(
    json_log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = json_log
    event_id = uuid.uuid4()
    with context.bind(request_id="req-outer", actor_id="user:1"), context.bind_log(consumer="x"):
        with context.run_scope(
            {"request_id": "req-event", "source": "consumer:c1"},
            {"event_id": event_id, "delivery_id": 7, "consumer": "c1"},
        ):
            context.annotate_log(organization_id="org-1")
            logger.info("inside")
            assert context.current()["actor_id"] == "user:1"  # outer ids stay unless replaced
        logger.info("after")
    assert context.current() == {} and context.current_log() == {}
    inside, after = lines(stream)
    assert (inside["request_id"], inside["source"]) == ("req-event", "consumer:c1")
    assert (inside["event_id"], inside["delivery_id"]) == (str(event_id), "7")
    assert inside["organization_id"] == "org-1"
    assert (after["request_id"], after["consumer"]) == ("req-outer", "x")
    assert "event_id" not in after and "organization_id" not in after


def test_ten_digit_ids_are_not_phones_but_phones_written_as_phones_are(
    json_log: tuple[logging.Logger, io.StringIO],
) -> None:
    """Issue 41: a shop's 10-digit order id in a log line stays readable; a landline written
    as one (area code in parentheses, a separator, +55) is still masked."""
    logger, stream = json_log
    logger.warning("order 1234567890 skipped: GET /v1/789/orders/1234567890 answered 500")
    (line,) = lines(stream)
    assert line["message"].count("1234567890") == 2 and "[PHONE]" not in line["message"]
    for phone in ("(11) 3456-7890", "11 3456-7890", "+55 11 3456-7890", "551134567890"):
        assert redact(f"ligue {phone} hoje") == "ligue [PHONE] hoje", phone
