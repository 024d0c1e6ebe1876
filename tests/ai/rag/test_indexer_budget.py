"""RAG embeddings are paid from the AI budget: indexing over the budget embeds nothing and is
deferred to `ai_index_pending` until the budget allows; query embeddings are charged, and refused
(no retrieved context) over the budget."""

from __future__ import annotations

from typing import Any

import pytest

from ai.budget import account_for
from ai.models import AiAccount, Chunk, IndexPending
from ai.rag.indexer import pending_index, source_index
from ai.rag.retrieval import retrieve
from core.models import Organization
from crm.models import Product

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _priced_mock(settings: Any) -> None:
    """MOCK_AI's embeddings, at one cent per token: easy sums."""
    settings.AI = {"MOCK": True, "PRICE_EMBEDDING_CENTS_PER_MTOK": 1_000_000.0}


def budget(org: Organization, cents: int, spent: int = 0) -> AiAccount:
    account = account_for(org.pk)
    AiAccount.objects.filter(pk=account.pk).update(daily_budget_cents=cents, spent_cents=spent)
    account.refresh_from_db()
    return account


def item(org: Organization) -> Product:
    return Product.objects.create(
        organization=org, name="Garrafa térmica", description="Garrafa térmica de inox, 1 litro."
    )


def test_indexing_over_the_budget_is_deferred_then_done_when_the_budget_allows(
    org: Organization,
) -> None:
    account = budget(org, 100, spent=100)
    product = item(org)
    result = source_index(organization_id=org.pk, kind="product", source_id=str(product.pk))
    assert result.deferred and result.written == 0
    assert not Chunk.objects.filter(organization=org).exists()
    account.refresh_from_db()
    assert (account.spent_cents, account.calls) == (100, 0)  # nothing embedded, nothing charged
    assert IndexPending.objects.filter(organization=org, source_id=str(product.pk)).count() == 1

    assert pending_index() == 0  # still no room: stays pending
    assert IndexPending.objects.filter(organization=org).count() == 1

    budget(org, 10_000)  # the new day (or a raised budget)
    assert pending_index() == 1
    assert Chunk.objects.filter(organization=org).exists()
    assert not IndexPending.objects.filter(organization=org).exists()
    account.refresh_from_db()
    assert account.calls == 1 and account.spent_cents > 0 and account.tokens_in > 0


def test_query_embeddings_are_charged_and_refused_over_the_budget(org: Organization) -> None:
    budget(org, 10_000)
    product = item(org)
    source_index(organization_id=org.pk, kind="product", source_id=str(product.pk))
    before = AiAccount.objects.get(organization=org)
    assert retrieve(organization_id=org.pk, query="garrafa térmica", k=3)
    after = AiAccount.objects.get(organization=org)
    assert after.calls == before.calls + 1 and after.spent_cents > before.spent_cents

    budget(org, 10_000, spent=10_000)
    assert retrieve(organization_id=org.pk, query="garrafa térmica", k=3) == []
    refused = AiAccount.objects.get(organization=org)
    assert (refused.calls, refused.spent_cents) == (after.calls, 10_000)
