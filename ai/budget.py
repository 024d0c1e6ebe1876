"""Per-organization daily AI budgets (cents): check before a call, charge after it.

`budget_reserve` checks and charges in one statement (a conditional UPDATE: the row lock makes
concurrent reservations queue, and one made once today's spend reached the budget changes
nothing): every AI call reserves its estimated cost before it is made (responder, sentiment, RAG
indexing and query embeddings), so concurrent workers see each other's calls and cannot all
pass the check together. After the call, `budget_charge(..., reserved_cents=...)` settles the
difference with the actual cost, or `budget_release` gives the reservation back when no call was
made. The rule is unchanged: a call is allowed while today's spend is under the budget (the last
one may end above it).

`ai.budget_warning` fires once a day when the spend crosses AI_BUDGET_WARNING_PCT of the budget,
`ai.budget_throttled` once a day when it reaches the budget (then every AI call of the
organization is skipped until `daily-budget-reset` runs at 00:00 in AI_BUDGET_TIME_ZONE and
snapshots the day into `ai_usage_daily`).
"""

from __future__ import annotations

import datetime as dt
import uuid
import zoneinfo
from decimal import Decimal
from typing import TYPE_CHECKING

from django.db import connection, transaction
from django.utils import timezone

import eventbus
from ai import calls
from ai.conf import ai_settings
from ai.models import AiAccount, AiUsageDaily

if TYPE_CHECKING:
    from ai.calls import EmbeddingResult

OrgId = uuid.UUID | str


def local_today(now: dt.datetime | None = None) -> dt.date:
    """Today in the budget's time zone (America/Sao_Paulo by default)."""
    return (
        (now or timezone.now()).astimezone(zoneinfo.ZoneInfo(ai_settings.BUDGET_TIME_ZONE)).date()
    )


def next_local_midnight(now: dt.datetime | None = None) -> dt.datetime:
    zone = zoneinfo.ZoneInfo(ai_settings.BUDGET_TIME_ZONE)
    tomorrow = local_today(now) + dt.timedelta(days=1)
    return dt.datetime.combine(tomorrow, dt.time(0), tzinfo=zone)


def month_spend_cents(now: dt.datetime | None = None) -> dict[str, float]:
    """Each organization's spend this (budget time zone) month, by slug: the days snapshotted
    into `ai_usage_daily` plus the open day on its account."""
    today = local_today(now)
    first = today.replace(day=1)
    spend: dict[str, float] = {}
    days = AiUsageDaily.objects.filter(day__gte=first, day__lt=today)
    for slug, cents in days.values_list("organization__slug", "spent_cents"):
        spend[slug] = spend.get(slug, 0.0) + float(cents)
    accounts = AiAccount.objects.filter(spent_day__gte=first)
    for slug, cents in accounts.values_list("organization__slug", "spent_cents"):
        spend[slug] = spend.get(slug, 0.0) + float(cents)
    return spend


def account_for(organization_id: OrgId) -> AiAccount:
    """The organization's AI account, created with the default budget on first use."""
    account, _ = AiAccount.objects.get_or_create(
        organization_id=organization_id,
        defaults={
            "daily_budget_cents": ai_settings.DAILY_BUDGET_CENTS,
            "spent_day": local_today(),
        },
    )
    return account


def budget_allows(organization_id: OrgId) -> bool:
    """False once today's spend reached the budget (emits `ai.budget_throttled` once a day)."""
    account = account_for(organization_id)
    if account.spent_cents < account.daily_budget_cents:
        return True
    with transaction.atomic():
        locked = AiAccount.objects.select_for_update().get(pk=account.pk)
        _throttle_once(locked)
    return False


# Check and charge in one statement: nothing changes when the cost does not fit the budget.
RESERVE_SQL = """
UPDATE ai_account
   SET spent_cents = spent_cents + %(cost)s, updated_at = now()
 WHERE organization_id = %(org)s AND spent_cents < daily_budget_cents
RETURNING spent_cents
"""
RELEASE_SQL = """
UPDATE ai_account SET spent_cents = GREATEST(spent_cents - %(cost)s, 0), updated_at = now()
 WHERE organization_id = %(org)s
"""


def budget_reserve(organization_id: OrgId, cost_cents: float) -> bool:
    """Charge `cost_cents` now if today's spend is under the budget; False (nothing charged,
    `ai.budget_throttled` once a day) otherwise. One statement: a concurrent caller sees this
    reservation, so callers cannot all pass the check on the same spend."""
    account_for(organization_id)
    params: dict[str, Decimal | str] = {"cost": _cents(cost_cents), "org": str(organization_id)}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(RESERVE_SQL, params)
        if cursor.fetchone() is not None:
            return True
        _throttle_once(AiAccount.objects.select_for_update().get(organization_id=organization_id))
    return False


def budget_release(organization_id: OrgId, cost_cents: float) -> None:
    """Give back a reservation whose call did not happen (or failed)."""
    with connection.cursor() as cursor:
        cursor.execute(RELEASE_SQL, {"cost": _cents(cost_cents), "org": str(organization_id)})


def _cents(value: float) -> Decimal:
    return Decimal(str(round(value, 4)))


# One statement on the hot path: add the call and read back what the thresholds need.
CHARGE_SQL = """
UPDATE ai_account
   SET spent_cents = spent_cents + %(cost)s, calls = calls + 1,
       tokens_in = tokens_in + %(tokens_in)s, tokens_out = tokens_out + %(tokens_out)s,
       updated_at = now()
 WHERE organization_id = %(org)s
RETURNING spent_cents, daily_budget_cents, warned_at IS NULL, throttled_at IS NULL
"""


def budget_charge(
    organization_id: OrgId,
    *,
    cost_cents: float,
    tokens_in: int,
    tokens_out: int,
    reserved_cents: float = 0.0,
) -> None:
    """Add one call's cost and tokens to today's spend (less what `budget_reserve` charged for
    it already); warn or throttle on the way up."""
    params: dict[str, Decimal | int | str] = {
        "cost": _cents(cost_cents) - _cents(reserved_cents),
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "org": str(organization_id),
    }
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(CHARGE_SQL, params)
        row = cursor.fetchone()
        if row is None:  # the organization's first call: make its account, charge again
            account_for(organization_id)
            cursor.execute(CHARGE_SQL, params)
            row = cursor.fetchone()
        spent, budget, not_warned, not_throttled = row
        warn_at = Decimal(budget) * Decimal(str(ai_settings.BUDGET_WARNING_PCT)) / 100
        if (not_warned and spent >= warn_at) or (not_throttled and spent >= budget):
            account = AiAccount.objects.select_for_update().get(organization_id=organization_id)
            if account.spent_cents >= warn_at:
                _warn_once(account)  # also when one call jumps past 100%: not skipped
            if account.spent_cents >= budget:
                _throttle_once(account)


def charge_embedding(
    organization_id: OrgId, embedded: EmbeddingResult, *, reserved_cents: float
) -> None:
    """`budget_charge` for an embedding call (input tokens only), less what was reserved."""
    budget_charge(
        organization_id,
        cost_cents=embedded.cost_cents,
        tokens_in=embedded.tokens,
        tokens_out=0,
        reserved_cents=reserved_cents,
    )


def _warn_once(account: AiAccount) -> None:
    if account.warned_at is not None:
        return
    account.warned_at = timezone.now()
    account.save(update_fields=["warned_at"])
    pct = float(account.spent_cents) * 100 / max(account.daily_budget_cents, 1)
    eventbus.emit(
        "ai.budget_warning",
        organization=account.organization_id,
        entity_kind="ai_budget",
        payload={
            "pct_used": round(pct, 1),
            "daily_budget_cents": account.daily_budget_cents,
            "current_cents": float(account.spent_cents),
        },
        idempotency_key=f"ai.budget_warning:{account.organization_id}:{account.spent_day}",
    )


def _throttle_once(account: AiAccount) -> None:
    if account.throttled_at is not None:
        return
    account.throttled_at = timezone.now()
    account.save(update_fields=["throttled_at"])
    eventbus.emit(
        "ai.budget_throttled",
        organization=account.organization_id,
        entity_kind="ai_budget",
        payload={
            "daily_budget_cents": account.daily_budget_cents,
            "current_cents": float(account.spent_cents),
            "throttle_until": next_local_midnight().isoformat(),
        },
        idempotency_key=f"ai.budget_throttled:{account.organization_id}:{account.spent_day}",
    )


def budgets_reset(now: dt.datetime | None = None) -> int:
    """Snapshot every account's finished day into `ai_usage_daily` and start the new day.

    Idempotent: an account already on today's date is left alone; a snapshot row that exists
    (a retried run) is kept as is.
    """
    today = local_today(now)
    done = 0
    for pk in AiAccount.objects.filter(spent_day__lt=today).values_list("pk", flat=True):
        with transaction.atomic():
            account = AiAccount.objects.select_for_update().get(pk=pk)
            if account.spent_day >= today:
                continue
            _snapshot(account)
            account.spent_day, account.spent_cents, account.calls = today, Decimal(0), 0
            account.tokens_in = account.tokens_out = 0
            account.warned_at = account.throttled_at = None
            account.save()
            done += 1
    return done


def _snapshot(account: AiAccount) -> None:
    AiUsageDaily.objects.get_or_create(
        organization_id=account.organization_id,
        day=account.spent_day,
        defaults={
            "spent_cents": account.spent_cents,
            "budget_cents": account.daily_budget_cents,
            "calls": account.calls,
            "tokens_in": account.tokens_in,
            "tokens_out": account.tokens_out,
            "throttled": account.throttled_at is not None,
        },
    )


def embedding_estimate(texts: list[str]) -> tuple[int, float]:
    """(tokens, cents) an embedding call for `texts` is reserved for: about four characters a
    token, rounded up per text; the charge after the call uses the provider's count."""
    tokens = sum(len(text) // 4 + 1 for text in texts)
    return tokens, calls.cost_cents(tokens, embedding=True)


def chat_estimate(text: str) -> float:
    """The cents a chat call about `text` is reserved for (its input, about four characters a
    token); the charge after the call uses the provider's counts."""
    return calls.cost_cents(len(text) // 4 + 1, 0)
