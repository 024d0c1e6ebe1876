"""`POST /api/v1/cron/<job>` over real HTTP (pytest-django's live server on loopback)."""

from __future__ import annotations

import datetime as dt
import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from eventbus.store.models import EventLog
from jobs.registry import Job, jobs

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "s3cret-for-tests-only"


def call(
    base: str, name: str, headers: dict[str, str] | None = None, method: str = "POST"
) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        f"{base}/api/v1/cron/{name}", data=b"" if method == "POST" else None, method=method
    )
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        body = exc.read()
        try:
            return exc.code, json.loads(body or b"{}")
        except json.JSONDecodeError:
            return exc.code, {}


@pytest.fixture
def server(live_server: object, settings: object) -> Iterator[str]:
    settings.INTERNAL_CRON_SECRET = SECRET  # type: ignore[attr-defined]
    with jobs.temporarily(
        Job("test-seven", lambda: 7, every=dt.timedelta(minutes=1)),
        Job("test-boom", lambda: 1 // 0, every=dt.timedelta(minutes=1)),
    ):
        yield live_server.url  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"x-cron-secret": "wrong"},
        {"Authorization": f"Basic {SECRET}"},
        {"Authorization": "Bearer "},
    ],
    ids=["none", "wrong-bearer", "wrong-header", "not-bearer", "empty"],
)
def test_missing_or_wrong_secret_is_403_and_runs_nothing(
    server: str, headers: dict[str, str]
) -> None:
    assert call(server, "test-seven", headers) == (403, {"error": "forbidden"})
    assert not EventLog.objects.filter(event_type="cron.started").exists()


def test_no_configured_secret_refuses_everything(server: str, settings: object) -> None:
    settings.INTERNAL_CRON_SECRET = ""  # type: ignore[attr-defined]
    assert call(server, "test-seven", {"Authorization": "Bearer "})[0] == 403
    assert call(server, "test-seven", {"x-cron-secret": ""})[0] == 403


@pytest.mark.parametrize(
    "headers", [{"Authorization": f"Bearer {SECRET}"}, {"x-cron-secret": SECRET}]
)
def test_the_secret_runs_the_job_and_records_it(server: str, headers: dict[str, str]) -> None:
    status, body = call(server, "test-seven", headers)
    assert status == 200
    assert body["status"] == "completed" and body["rows_processed"] == 7
    completed = EventLog.objects.get(event_type="cron.completed", entity_id=body["run_id"])
    assert completed.payload["rows_processed"] == 7
    assert completed.payload["trigger"] == "http"
    assert isinstance(completed.payload["duration_ms"], int)


def test_a_failed_run_answers_500_without_details(server: str) -> None:
    status, body = call(server, "test-boom", {"x-cron-secret": SECRET})
    assert status == 500
    assert body["status"] == "failed"
    assert "ZeroDivisionError" not in json.dumps(body)
    failed = EventLog.objects.get(event_type="cron.failed", entity_id=body["run_id"])
    assert failed.payload["error"].startswith("ZeroDivisionError")


def test_unknown_job_is_404_and_other_methods_405(server: str) -> None:
    status, body = call(server, "no-such-job", {"x-cron-secret": SECRET})
    assert status == 404 and "test-seven" in body["jobs"]  # type: ignore[operator]
    assert call(server, "test-seven", {"x-cron-secret": SECRET}, method="GET")[0] == 405
