"""rag-indexer-worker and the indexer: products, articles, contacts and leads become chunks with
deterministic ids; unchanged content writes nothing; deleted sources lose their chunks; a merged
or redacted contact's chunks are gone; tenants never see each other's chunks."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import eventbus
from ai import services
from ai.models import Chunk, KnowledgeArticle
from ai.rag.chunking import CHUNK_WORDS, chunk_id, chunk_version, split_text
from ai.rag.indexer import source_index
from ai.rag.retrieval import retrieve
from core.lgpd_registry import REGISTRY
from core.models import Organization
from crm.models import Contact, Product
from eventbus.dispatch.worker import Worker, WorkerOptions
from lgpd.selectors import subject_for
from tests.support.factories import ContactFactory, LeadFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _mock_embeddings(ai_mock: None) -> None:
    """The hash embeddings of MOCK_AI (deterministic, lexical)."""


def run_indexer() -> None:
    Worker(
        WorkerOptions(consumers=["rag-indexer-worker"], once=True, listen=False, startup_jitter=0)
    ).run()


def product(org: Organization, name: str, description: str, **extra: Any) -> Product:
    return Product.objects.create(organization=org, name=name, description=description, **extra)


def synced(item: Product, action: str = "updated") -> None:
    eventbus.emit(
        "nuvemshop.product_synced",
        organization=item.organization_id,
        entity_kind="product",
        entity_id=item.pk,
        payload={"product_id": str(item.pk), "action": action},
    )


def chunks_of(kind: str, source_id: object) -> list[Chunk]:
    return list(Chunk.objects.filter(source_kind=kind, source_id=str(source_id)))


def test_a_synced_product_is_chunked_with_deterministic_ids(org: Organization) -> None:
    item = product(org, "Tênis Veloz", "Tênis de corrida com amortecimento.", price_cents=29990)
    synced(item)
    run_indexer()
    (chunk,) = chunks_of("product", item.pk)
    assert (
        chunk.content
        == "Produto: Tênis Veloz. Tênis de corrida com amortecimento. Preço: 299.90 BRL."
    )
    assert chunk.id == chunk_id(
        organization_id=org.pk,
        source_kind="product",
        source_id=str(item.pk),
        content=chunk.content,
        version=chunk_version(),
    )
    assert len(chunk.embedding) == 384 and chunk.organization_id == org.pk


def test_re_indexing_unchanged_content_writes_nothing(org: Organization) -> None:
    item = product(org, "Bota", "Bota de couro impermeável. " * 60)  # several chunks
    first = source_index(organization_id=org.pk, kind="product", source_id=str(item.pk))
    assert first.written == len(split_text(Product.objects.get().description)) > 1
    before = sorted(Chunk.objects.values_list("id", "created_at"))
    with CaptureQueriesContext(connection) as queries:
        again = source_index(organization_id=org.pk, kind="product", source_id=str(item.pk))
    assert (again.written, again.deleted) == (0, 0)
    writes = [q["sql"] for q in queries if q["sql"].split()[0] in ("INSERT", "UPDATE", "DELETE")]
    assert writes == []
    assert sorted(Chunk.objects.values_list("id", "created_at")) == before


def test_changed_content_replaces_only_the_changed_chunks(org: Organization) -> None:
    words = [f"palavra{n}" for n in range(CHUNK_WORDS * 2)]
    item = product(org, "Manual", " ".join(words))
    source_index(organization_id=org.pk, kind="product", source_id=str(item.pk))
    old = set(Chunk.objects.values_list("id", flat=True))
    Product.objects.filter(pk=item.pk).update(description=" ".join([*words[:-5], "novo", "fim"]))
    result = source_index(organization_id=org.pk, kind="product", source_id=str(item.pk))
    new = set(Chunk.objects.values_list("id", flat=True))
    assert result.written >= 1 and result.deleted >= 1
    assert old & new  # the unchanged first window kept its row
    assert "novo" in " ".join(Chunk.objects.values_list("content", flat=True))


def test_a_deleted_product_loses_its_chunks(org: Organization) -> None:
    item = product(org, "Sandália", "Sandália de praia.")
    other = product(org, "Chinelo", "Chinelo de borracha.")
    synced(item)
    synced(other)
    run_indexer()
    Product.objects.filter(pk=item.pk).update(deleted_at=timezone.now())
    synced(item, "deleted")
    run_indexer()
    assert chunks_of("product", item.pk) == []
    assert len(chunks_of("product", other.pk)) == 1


def test_a_product_named_by_its_nuvemshop_id_is_found(org: Organization) -> None:
    item = product(org, "Mochila", "Mochila urbana.", ns_product_id=123456)
    eventbus.emit(
        "nuvemshop.product_synced",
        organization=org,
        entity_kind="product",
        payload={"product_id": 123456, "action": "created"},
    )
    run_indexer()
    assert len(chunks_of("product", item.pk)) == 1


def test_a_knowledge_article_saved_in_the_admin_is_indexed_and_unindexed(
    org: Organization,
) -> None:
    article = KnowledgeArticle(organization=org, title="Trocas", body="Trocas em até 30 dias.")
    services.article_save(article=article)
    run_indexer()
    assert [c.content for c in chunks_of("article", article.pk)] == [
        "Trocas. Trocas em até 30 dias."
    ]
    services.article_delete(article=article)
    run_indexer()
    assert chunks_of("article", article.pk) == []


def contact_and_lead_chunks(org: Organization) -> Contact:
    contact = ContactFactory(organization=org, name="Maria Souza", phone="5511998765432")
    lead = LeadFactory(organization=org, contact=contact, name="Maria - bota de couro")
    eventbus.emit(
        "contact.created",
        organization=org,
        entity_kind="contact",
        entity_id=contact.pk,
        payload={"contact_id": str(contact.pk), "phone": contact.phone, "source": "whatsapp"},
    )
    eventbus.emit(
        "lead.created",
        organization=org,
        entity_kind="lead",
        entity_id=lead.pk,
        payload={"name": lead.name, "source": "manual", "pipeline_id": "d", "stage_id": "new"},
    )
    run_indexer()
    assert {c.source_kind for c in Chunk.objects.filter(contact_id=contact.pk)} == {
        "contact",
        "lead",
    }
    return contact


def test_a_redacted_contact_s_chunks_are_gone(org: Organization) -> None:
    contact = contact_and_lead_chunks(org)
    keep = product(org, "Bota", "Bota de couro.")
    source_index(organization_id=org.pk, kind="product", source_id=str(keep.pk))
    subject = subject_for(contact)
    exported = next(c for c in REGISTRY if c.name == "ai_derived").export(subject)
    assert {row["record"] for row in exported} == {"ai.Chunk"}
    for category in REGISTRY:
        category.redact(subject)
    assert not Chunk.objects.filter(contact_id=contact.pk).exists()
    assert len(chunks_of("product", keep.pk)) == 1


def test_a_merged_away_contact_s_chunks_are_gone(org: Organization) -> None:
    merged = contact_and_lead_chunks(org)
    into = ContactFactory(organization=org, name="Maria S. Souza")
    eventbus.emit(
        "contact.merged",
        organization=org,
        entity_kind="contact",
        entity_id=into.pk,
        payload={
            "from_contact_id": str(merged.pk),
            "into_contact_id": str(into.pk),
            "merged_fields": ["name"],
        },
    )
    run_indexer()
    assert not Chunk.objects.filter(contact_id=merged.pk).exists()
    assert [c.content for c in chunks_of("contact", into.pk)] == ["Cliente: Maria S. Souza."]


def test_retrieval_stays_inside_the_organization_and_the_contact(
    org: Organization, org_b: Organization
) -> None:
    mine = product(org, "Garrafa térmica", "Garrafa térmica de inox.")
    theirs = product(org_b, "Garrafa térmica", "Garrafa térmica de inox.")
    for item in (mine, theirs):
        source_index(organization_id=item.organization_id, kind="product", source_id=str(item.pk))
    contact = contact_and_lead_chunks(org)
    found = retrieve(organization_id=org.pk, query="garrafa térmica inox", k=10)
    assert {r.source_id for r in found} == {str(mine.pk)}  # no contact chunk, no other tenant
    for_contact = retrieve(organization_id=org.pk, query="Maria bota", k=10, contact_id=contact.pk)
    assert {r.source_kind for r in for_contact} >= {"contact", "lead"}
    stranger = retrieve(
        organization_id=org.pk,
        query="Maria bota",
        k=10,
        contact_id=ContactFactory(organization=org).pk,
    )
    assert {r.source_kind for r in stranger} == {"product"}


def test_the_tenants_rag_flag_switches_retrieval_off_and_on(org: Organization) -> None:
    item = product(org, "Garrafa térmica", "Garrafa térmica de inox.")
    source_index(organization_id=org.pk, kind="product", source_id=str(item.pk))
    Organization.objects.filter(pk=org.pk).update(feature_flags={"rag": False})
    assert retrieve(organization_id=org.pk, query="garrafa térmica inox", k=10) == []
    Organization.objects.filter(pk=org.pk).update(feature_flags={})
    found = retrieve(organization_id=org.pk, query="garrafa térmica inox", k=10)
    assert {r.source_id for r in found} == {str(item.pk)}
