"""The model provider in `health-check-integrations`, `/api/v1/health` (`ai_provider`) and
/metrics (`deskcomm_ai_provider_up`), against the fake provider on loopback."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from ai.models import ProviderHealth
from core.metrics import exposition
from jobs.registry import job_run
from tests.support.openai_fake import EMBEDDINGS, Failure, OpenAIFake

pytestmark = pytest.mark.django_db(transaction=True)

ALERTS: list[tuple[str, dict[str, object]]] = []


def record_alert(subject: str, details: dict[str, object]) -> None:
    ALERTS.append((subject, details))


@pytest.fixture(autouse=True)
def _alerts(settings: Any) -> None:
    ALERTS.clear()
    settings.ALERT_HOOKS = [f"{__name__}.record_alert"]


def provider_check() -> dict[str, object]:
    answer = Client().get("/api/v1/health").json()
    check: dict[str, object] = answer["checks"]["ai_provider"]
    return check


def gauge(name: str) -> float | None:
    for line in exposition().decode().splitlines():
        if line.startswith(f"{name} "):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.mark.usefixtures("unhurried")
def test_the_health_job_pings_the_provider_and_the_health_answer_reads_it(
    ai_on_fake: OpenAIFake,
) -> None:
    assert provider_check()["status"] == "ok"  # never pinged: nothing known to be wrong
    assert job_run(name="health-check-integrations", trigger="test").status == "completed"
    assert ai_on_fake.calls(EMBEDDINGS)[-1]["input"] == ["ping"]
    assert ProviderHealth.objects.get().ok
    assert gauge("deskcomm_ai_provider_up") == 1.0

    ai_on_fake.fail_next(EMBEDDINGS, *[Failure(status=503)] * 10)
    job_run(name="health-check-integrations", trigger="test")
    check = provider_check()
    assert (check["status"], check["error"], check["required"]) == (
        "fail",
        "ProviderUnhealthy",
        False,
    )
    assert gauge("deskcomm_ai_provider_up") == 0.0
    assert ALERTS == []  # one failure: not yet
    job_run(name="health-check-integrations", trigger="test")
    assert [subject for subject, _ in ALERTS] == ["AI model provider unhealthy"]
    assert gauge("deskcomm_ai_provider_consecutive_failures") == 2.0
    assert "sk-test" not in str(ALERTS)  # the error's class, never the key

    ai_on_fake.failures.clear()
    job_run(name="health-check-integrations", trigger="test")
    assert provider_check()["status"] == "ok" and gauge("deskcomm_ai_provider_up") == 1.0
