"""A handler stuck in its transaction is ended by the server's timeout and blocks no one."""

from __future__ import annotations

import pytest
from django.db import connection

import eventbus
from core.models import Organization
from crm.models import Lead
from eventbus.store.models import Delivery
from tests.support.db import raw_connection
from tests.support.processes import start_drain
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def the_handler_holds_its_lock() -> bool:
    """The idle-lock-worker wrote its lead and now waits for someone to wait on it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
            " AND query LIKE %s AND pid <> pg_backend_pid()",
            ["%idle-lock-worker: waiting for a waiter%"],
        )
        return bool(cursor.fetchone()[0])


def test_an_atomic_handler_idle_in_its_transaction_is_ended_and_its_lock_freed(
    org: Organization,
) -> None:
    lead = Lead.objects.create(organization=org, name="as created", stage_id="new")
    eventbus.emit(
        "test.idle_lock",
        organization=org,
        entity_kind="lead",
        entity_id=lead.pk,
        payload={"lead_id": str(lead.pk)},
    )
    drain = start_drain(
        "--once",
        "--no-listen",
        "--consumer",
        "idle-lock-worker",
        DB_IDLE_IN_TRANSACTION_TIMEOUT="1",
    )
    try:
        wait_for(the_handler_holds_its_lock, timeout=60, what=drain.output)
        with raw_connection() as waiter:
            waiter.execute("SET statement_timeout = '60s'")  # a clear failure, never a hang
            # Blocks on the handler's row lock until the server ends the handler's session.
            waiter.execute(
                "UPDATE deskcomm_lead SET name = 'written by the waiter' WHERE id = %s", [lead.pk]
            )
        assert drain.wait(timeout=60) == 0, drain.output()  # the worker itself carried on
    finally:
        drain.close()
    lead.refresh_from_db()
    assert lead.name == "written by the waiter"  # the stuck handler's write was rolled back
    delivery = Delivery.objects.get(consumer="idle-lock-worker")
    assert (delivery.status, delivery.attempts) == ("dead", 1)  # max_attempts=1
    assert "idle-in-transaction timeout" in (delivery.last_error or ""), delivery.last_error
