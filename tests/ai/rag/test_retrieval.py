"""Retrieval quality on a small fixed catalogue (15 products, one question each) with the
deterministic hash embeddings of MOCK_AI: hit@1 and hit@3. These embeddings are lexical (shared
words), not semantic: the figures say the index and the query path work, not how a real
embedding model would do."""

from __future__ import annotations

import pytest

from ai.rag.indexer import source_index
from ai.rag.retrieval import retrieve
from core.models import Organization
from crm.models import Product
from tests.support.rag_corpus import PRODUCTS, QUESTIONS

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _mock_embeddings(ai_mock: None) -> None:
    """The hash embeddings of MOCK_AI."""


def test_the_question_s_product_comes_first(
    org: Organization, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = []
    for name, description, price in PRODUCTS:
        item = Product.objects.create(
            organization=org, name=name, description=description, price_cents=price
        )
        source_index(organization_id=org.pk, kind="product", source_id=str(item.pk))
        ids.append(str(item.pk))
    ranks = []
    for question, answer in QUESTIONS:
        found = [r.source_id for r in retrieve(organization_id=org.pk, query=question, k=3)]
        ranks.append(found.index(ids[answer]) + 1 if ids[answer] in found else None)
    hit1 = sum(r == 1 for r in ranks) / len(ranks)
    hit3 = sum(r is not None for r in ranks) / len(ranks)
    with capsys.disabled():
        print(
            f"\nRAG hash embeddings, {len(QUESTIONS)} questions: hit@1={hit1:.2f} hit@3={hit3:.2f}"
        )
    assert hit1 >= 0.8
    assert hit3 >= 0.9
