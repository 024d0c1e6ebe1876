"""The AI budget's check-and-charge (`budget_reserve`): one statement, so concurrent callers on
their own connections can never spend past the budget together."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from ai.budget import account_for, budget_charge, budget_release, budget_reserve
from ai.models import AiAccount
from core.models import Organization
from eventbus.store.models import EventLog


@pytest.mark.django_db(transaction=True)
def test_concurrent_reservations_never_pass_the_budget(org: Organization) -> None:
    account = account_for(org.pk)
    AiAccount.objects.filter(pk=account.pk).update(daily_budget_cents=100)
    callers = 12
    start = threading.Barrier(callers)
    granted: list[bool] = []
    lock = threading.Lock()

    def reserve() -> None:
        try:
            start.wait(timeout=60)
            allowed = budget_reserve(org.pk, 10)
            with lock:
                granted.append(allowed)
        finally:
            connection.close()  # each thread had its own connection

    threads = [threading.Thread(target=reserve) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(granted) == [False] * 2 + [True] * 10
    account.refresh_from_db()
    assert account.spent_cents == 100
    assert EventLog.objects.filter(event_type="ai.budget_throttled").count() == 1


@pytest.mark.django_db
def test_a_reservation_is_settled_or_released(org: Organization, settings: Any) -> None:
    account = account_for(org.pk)
    AiAccount.objects.filter(pk=account.pk).update(daily_budget_cents=50)
    assert budget_reserve(org.pk, 20)
    budget_charge(org.pk, cost_cents=12, tokens_in=12, tokens_out=0, reserved_cents=20)
    account.refresh_from_db()
    assert (account.spent_cents, account.calls, account.tokens_in) == (12, 1, 12)
    assert budget_reserve(org.pk, 38)  # under the budget: allowed (it may end above it)
    budget_release(org.pk, 38)
    account.refresh_from_db()
    assert (account.spent_cents, account.calls) == (12, 1)
    assert budget_reserve(org.pk, 40)  # 52: the day's last call
    assert not budget_reserve(org.pk, 1)  # at or over the budget: refused, nothing charged
    account.refresh_from_db()
    assert account.spent_cents == 52
