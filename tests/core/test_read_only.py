"""Read-only mode (seed 001 §13.2; core.read_only): with the database out, the WAHA and
Nuvemshop receivers write raw requests to disk without a query and answer 200, API writes answer
503; once the mode is off, the buffer is replayed through the receivers in arrival order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from core.read_only import replay_buffer
from crm.models import Message
from jobs.registry import job_run
from nuvemshop.models import Store, WebhookReceipt
from tests.nuvemshop.conftest import fake, shop, store  # noqa: F401
from tests.support.nuvemshop import APP_SECRET, FakeNuvemshop
from tests.support.waha import inbound_message, signed_webhook
from tests.whatsapp.conftest import (  # noqa: F401
    HMAC_SECRET,
    session,
    waha,
    waha_engine,
    waha_settings,
)
from whatsapp.models import WahaSession

pytestmark = pytest.mark.django_db(transaction=True)

CHAT = "5511977776666@c.us"


@pytest.fixture
def buffer(session: WahaSession, settings: Any, tmp_path: Path) -> Path:  # noqa: F811
    """The buffer folder (READ_ONLY_BUFFER_ROOT), beside WAHA session "loja" of `org`."""
    settings.READ_ONLY_BUFFER_ROOT = tmp_path
    return tmp_path


def webhook(client: Client, text: str, *, secret: str = HMAC_SECRET) -> Any:
    body, headers = signed_webhook("loja", "message", inbound_message(CHAT, text), secret=secret)
    return client.post(
        "/api/webhooks/waha/loja", data=body, content_type="application/json", headers=headers
    )


def test_webhooks_are_buffered_without_the_database_and_replayed_in_order(
    buffer: Path, settings: Any, django_assert_num_queries: Any
) -> None:
    tmp_path = buffer
    settings.READ_ONLY_MODE = True
    client = Client()
    with django_assert_num_queries(0):
        for text in ("primeira", "segunda"):
            answered = webhook(client, text)
            assert (answered.status_code, answered.json()) == (200, {"status": "buffered"})
        forged = webhook(client, "forjada", secret="not-the-secret")
        assert forged.status_code == 200  # its signature is checked at replay
        sent = client.post("/api/v1/events", data={}, content_type="application/json")
    assert sent.status_code == 503 and sent["Retry-After"] == "60"
    assert "read-only mode" in sent.json()["error"]
    assert len(list(tmp_path.glob("*.json"))) == 3
    assert Message.objects.count() == 0
    # Still in read-only mode: nothing replays.
    assert replay_buffer().left == 3 and Message.objects.count() == 0

    settings.READ_ONLY_MODE = False
    replayed = replay_buffer()
    assert (replayed.delivered, replayed.rejected, replayed.left) == (2, 1, 0)
    assert list(Message.objects.order_by("created_at").values_list("body", flat=True)) == [
        "primeira",
        "segunda",
    ]
    assert list(tmp_path.glob("*.json")) == []
    assert len(list((tmp_path / "rejected").glob("*.json"))) == 1  # the forged one, kept


def test_the_replay_job_runs_every_minute_and_reads_without_the_mode(
    buffer: Path, settings: Any
) -> None:
    from jobs.registry import jobs

    settings.READ_ONLY_MODE = True
    webhook(Client(), "guardada")
    settings.READ_ONLY_MODE = False
    assert jobs.get("read-only-buffer-replay").every is not None
    result = job_run(name="read-only-buffer-replay", trigger="test")
    assert result.status == "completed" and result.rows_processed == 1
    assert Message.objects.get().body == "guardada"


def test_outside_read_only_mode_nothing_is_buffered(buffer: Path) -> None:
    answered = webhook(Client(), "direta")
    assert answered.status_code == 200 and answered.json() == {"result": "stored"}
    assert list(buffer.iterdir()) == []


def nuvemshop_webhook(client: Client, order: int, *, secret: str = APP_SECRET) -> Any:
    payload = {"store_id": 789, "event": "order/paid", "id": order}
    body, signature = FakeNuvemshop.signed(payload, secret)
    return client.post(
        "/api/webhooks/nuvemshop/order/paid", data=body, content_type="application/json",
        headers={"x-linkedstore-hmac-sha256": signature},
    )  # fmt: skip


def test_nuvemshop_webhooks_are_buffered_without_the_database_and_replayed_in_order(
    store: Store,  # noqa: F811
    settings: Any,
    tmp_path: Path,
    django_assert_num_queries: Any,
) -> None:
    settings.READ_ONLY_BUFFER_ROOT = tmp_path
    settings.READ_ONLY_MODE = True
    client = Client()
    with django_assert_num_queries(0):
        for order in (555, 556, 555):  # the shop retrying the first one: idempotent at replay
            answered = nuvemshop_webhook(client, order)
            assert (answered.status_code, answered.json()) == (200, {"status": "buffered"})
        forged = nuvemshop_webhook(client, 557, secret="not-the-app-secret")
        assert forged.status_code == 200  # its signature is checked at replay
    buffered = sorted(tmp_path.glob("*.json"))
    assert len(buffered) == 4 and not WebhookReceipt.objects.exists()
    assert "X-Linkedstore-Hmac-Sha256" in buffered[0].read_text()  # the signature kept for replay
    assert replay_buffer().left == 4 and not WebhookReceipt.objects.exists()

    settings.READ_ONLY_MODE = False
    replayed = replay_buffer()
    assert (replayed.delivered, replayed.rejected, replayed.left) == (3, 1, 0)
    receipts = WebhookReceipt.objects.order_by("received_at")
    assert list(receipts.values_list("ns_resource_id", flat=True)) == [555, 556]
    assert {receipt.store_id for receipt in receipts} == {store.pk}
    assert list(tmp_path.glob("*.json")) == []
    assert len(list((tmp_path / "rejected").glob("*.json"))) == 1  # the forged one, kept
