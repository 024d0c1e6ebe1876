"""The install flow (admin -> authorize -> callback with code and state) and the webhook
receiver (HMAC over the raw body, idempotent by the store's event identity)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from django.test import Client

from core.models import Organization
from eventbus.store.models import EventLog
from nuvemshop.models import Store, WebhookReceipt
from tests.support.db import as_web_process
from tests.support.nuvemshop import FakeNuvemshop, FakeStore

pytestmark = pytest.mark.django_db

RECEIVER = "/api/webhooks/nuvemshop/"


def start_install(client: Client, org: Organization) -> str:
    response = client.post("/admin/nuvemshop/install/connect/", {"organization": org.pk})
    assert response.status_code == 302
    return str(response["Location"])


def accept(fake: FakeNuvemshop, authorize: str) -> dict[str, str]:
    """What the merchant's browser does: open the authorize page, accept, follow to the app."""
    page = httpx.get(authorize)
    assert page.status_code == 200 and "accept" in page.text
    accepted = httpx.get(f"{fake.base_url}/accept?" + urlsplit(authorize).query + "&store=789")
    callback = accepted.headers["location"]
    return {k: v[0] for k, v in parse_qs(urlsplit(callback).query).items()}


def test_install_exchanges_the_code_and_stores_the_token_encrypted(
    admin_client: Client, org: Organization, fake: FakeNuvemshop, shop: FakeStore
) -> None:
    fake.redirect_url = "http://testserver/admin/nuvemshop/install/callback/"
    authorize = start_install(admin_client, org)
    assert authorize.startswith(f"{fake.base_url}/apps/4321/authorize?state=")
    params = accept(fake, authorize)
    response = admin_client.get("/admin/nuvemshop/install/callback/", params)
    assert response.status_code == 302, response.content
    store = Store.objects.get(ns_store_id=789)
    assert (store.organization_id, store.status) == (org.pk, "connected")
    assert shop.token not in store.access_token_encrypted
    assert store.access_token == shop.token
    assert fake.token_requests[-1]["grant_type"] == "authorization_code"
    assert EventLog.objects.filter(event_type="nuvemshop.store_connected").count() == 1


def test_a_callback_with_another_state_connects_nothing(
    admin_client: Client, org: Organization, fake: FakeNuvemshop, shop: FakeStore
) -> None:
    start_install(admin_client, org)
    code = fake.issue_code(789)
    response = admin_client.get(
        "/admin/nuvemshop/install/callback/", {"code": code, "state": "forged"}
    )
    assert response.status_code == 400
    assert not Store.objects.exists()
    assert fake.token_requests == []  # the code was never even sent


def post(client: Client, event: str, payload: dict[str, Any], signature: str | None = None) -> Any:
    body, good = FakeNuvemshop.signed(payload)
    return client.post(
        RECEIVER + event,
        data=body,
        content_type="application/json",
        headers={"x-linkedstore-hmac-sha256": signature if signature is not None else good},
    )


def test_a_valid_webhook_is_recorded_once_and_a_replay_writes_nothing(
    client: Client, store: Store, fake: FakeNuvemshop
) -> None:
    payload = {"store_id": 789, "event": "order/paid", "id": 555}
    assert post(client, "order/paid", payload).json() == {"status": "accepted"}
    assert fake.api_hits() == []  # rows and events only: the worker calls the shop
    events = EventLog.objects.filter(event_type="nuvemshop.webhook_received")
    assert events.count() == 1 and WebhookReceipt.objects.count() == 1
    replay = post(client, "order/paid", payload)
    assert (replay.status_code, replay.json()) == (200, {"status": "duplicate"})
    assert events.count() == 1 and WebhookReceipt.objects.count() == 1


@pytest.mark.parametrize("signature", ["", "0" * 64, "deadbeef"])
def test_a_bad_signature_is_401_and_writes_nothing(
    client: Client, store: Store, signature: str
) -> None:
    response = post(client, "order/paid", {"store_id": 789, "id": 1}, signature=signature)
    assert response.status_code == 401
    assert not WebhookReceipt.objects.exists()
    assert not EventLog.objects.filter(event_type__startswith="nuvemshop.").exists()


def test_a_body_changed_after_signing_is_refused(client: Client, store: Store) -> None:
    body, signature = FakeNuvemshop.signed({"store_id": 789, "id": 1})
    response = client.post(
        RECEIVER + "order/paid",
        data=body.replace(b"1}", b"2}"),
        content_type="application/json",
        headers={"x-linkedstore-hmac-sha256": signature},
    )
    assert response.status_code == 401 and not WebhookReceipt.objects.exists()


def test_a_webhook_for_an_unknown_store_is_acknowledged_and_ignored(
    client: Client, fake: FakeNuvemshop
) -> None:
    response = post(client, "order/paid", {"store_id": 1, "event": "order/paid", "id": 5})
    assert (response.status_code, response.json()) == (200, {"status": "ignored"})
    assert not WebhookReceipt.objects.exists()


def test_an_event_the_url_does_not_name_is_refused(client: Client, store: Store) -> None:
    response = post(client, "order/paid", {"store_id": 789, "event": "order/cancelled", "id": 5})
    assert response.status_code == 400 and not WebhookReceipt.objects.exists()
    assert post(client, "order/unknown", {"store_id": 789, "id": 5}).status_code == 404


def test_the_receiver_works_in_a_web_process_that_fails_closed(
    enforced: None, client: Client, store: Store
) -> None:
    """In production's closed web sessions the receiver scopes itself (bypass to find the store
    the shop names, then that store's tenant) and records the delivery."""
    with as_web_process():
        response = post(client, "order/paid", {"store_id": 789, "event": "order/paid", "id": 9})
        assert response.json() == {"status": "accepted"}
        assert WebhookReceipt.objects.count() == 0  # the test's own session is closed too
    receipt = WebhookReceipt.objects.get()
    assert receipt.organization_id == store.organization_id


def install(admin_client: Client, org: Organization, fake: FakeNuvemshop) -> Any:
    fake.redirect_url = "http://testserver/admin/nuvemshop/install/callback/"
    params = accept(fake, start_install(admin_client, org))
    return admin_client.get("/admin/nuvemshop/install/callback/", params)


def test_a_store_reconnects_to_its_organization_with_a_fresh_token(
    admin_client: Client, org: Organization, fake: FakeNuvemshop, shop: FakeStore
) -> None:
    """The runbook for a revoked token (docs/integrations/nuvemshop.md): "Connect a store" again,
    same organization."""
    assert install(admin_client, org, fake).status_code == 302
    Store.objects.filter(ns_store_id=789).update(status="token_invalid", status_reason="401")
    shop.token = "tok-789-reinstalled"
    response = install(admin_client, org, fake)
    assert response.status_code == 302, response.content
    store = Store.objects.get(ns_store_id=789)
    assert (store.organization_id, store.status, store.status_reason) == (org.pk, "connected", "")
    assert store.access_token == "tok-789-reinstalled"
    assert EventLog.objects.filter(event_type="nuvemshop.store_connected").count() == 2


def test_a_store_of_another_organization_is_refused_clearly(
    admin_client: Client,
    org: Organization,
    org_b: Organization,
    fake: FakeNuvemshop,
    shop: FakeStore,
) -> None:
    assert install(admin_client, org, fake).status_code == 302
    shop.token = "tok-789-elsewhere"
    response = install(admin_client, org_b, fake)
    assert response.status_code == 400
    assert b"already connected to another organization" in response.content
    store = Store.objects.get(ns_store_id=789)
    assert (store.organization_id, store.access_token) == (org.pk, "tok-789")


def test_an_organization_scoped_installer_connects_a_store_inside_their_organization(
    enforced: None, org: Organization, fake: FakeNuvemshop, shop: FakeStore
) -> None:
    """The callback runs with the tenant scope of the organization picked (one of theirs)."""
    from tests.support.admin import staff

    client = Client()
    client.force_login(staff("installer", "nuvemshop.connect_store", organizations=[org]))
    fake.redirect_url = "http://testserver/admin/nuvemshop/install/callback/"
    params = accept(fake, start_install(client, org))
    response = client.get("/admin/nuvemshop/install/callback/", params)
    assert response.status_code == 302, response.content
    store = Store.objects.get(ns_store_id=789)
    assert (store.organization_id, store.status) == (org.pk, "connected")
