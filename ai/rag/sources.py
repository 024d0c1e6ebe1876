"""The text of each indexed source (products, knowledge articles, contacts, leads).

`source_text` returns None for a source that must have no chunks (deleted, unpublished, gone,
anonymized). Contact and lead chunks carry the contact's id, so retrieval shows them only in that
contact's conversations and the LGPD redaction deletes them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ai.models import Chunk, KnowledgeArticle
from crm.models import Contact, Lead, Product


@dataclass(frozen=True)
class SourceText:
    text: str
    contact_id: uuid.UUID | None = None


def source_text(organization_id: uuid.UUID, kind: str, source_id: str) -> SourceText | None:
    readers = {
        Chunk.Source.PRODUCT: _product,
        Chunk.Source.ARTICLE: _article,
        Chunk.Source.CONTACT: _contact,
        Chunk.Source.LEAD: _lead,
    }
    try:
        pk = uuid.UUID(source_id)
    except ValueError:
        return None
    return readers[Chunk.Source(kind)](organization_id, pk)


def _product(organization_id: uuid.UUID, pk: uuid.UUID) -> SourceText | None:
    product = Product.objects.filter(organization_id=organization_id, pk=pk).first()
    if product is None or product.deleted_at is not None or not product.published:
        return None
    parts = [f"Produto: {product.name}.", product.description]
    if product.price_cents is not None:
        parts.append(f"Preço: {product.price_cents / 100:.2f} {product.currency}.")
    if product.stock is not None:
        parts.append(f"Estoque: {product.stock}.")
    return SourceText(" ".join(p for p in parts if p))


def _article(organization_id: uuid.UUID, pk: uuid.UUID) -> SourceText | None:
    article = KnowledgeArticle.objects.filter(organization_id=organization_id, pk=pk).first()
    if article is None or not article.published:
        return None
    return SourceText(f"{article.title}. {article.body}")


def _contact(organization_id: uuid.UUID, pk: uuid.UUID) -> SourceText | None:
    contact = Contact.objects.filter(organization_id=organization_id, pk=pk).first()
    if contact is None or contact.anonymized_at is not None or not contact.name:
        return None
    return SourceText(f"Cliente: {contact.name}.", contact_id=contact.pk)


def _lead(organization_id: uuid.UUID, pk: uuid.UUID) -> SourceText | None:
    lead = Lead.objects.filter(organization_id=organization_id, pk=pk).first()
    if lead is None or lead.contact_id is None:
        return None
    return SourceText(
        f"Oportunidade: {lead.name}, etapa {lead.stage_id}, origem {lead.source}.",
        contact_id=lead.contact_id,
    )
