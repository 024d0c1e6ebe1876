"""Which sources an event asks the RAG indexer to re-index."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import models

import eventbus
from ai.models import Chunk, KnowledgeArticle
from ai.rag.indexer import contact_chunks_delete, source_index
from crm.models import Contact, Lead, Product


def sources_of(
    event_type: str, payload: dict[str, Any], entity_id: uuid.UUID | None
) -> list[tuple[str, str]]:
    """(source kind, id) pairs to bring up to date for one event."""
    if event_type == "nuvemshop.product_synced":
        return [(Chunk.Source.PRODUCT, str(payload["product_id"]))]
    if event_type == "knowledge.article_changed":
        return [(Chunk.Source.ARTICLE, str(payload["article_id"]))]
    if event_type == "contact.merged":
        return [(Chunk.Source.CONTACT, str(payload["into_contact_id"]))]
    if event_type == "contact.created":
        return [(Chunk.Source.CONTACT, str(payload.get("contact_id") or entity_id))]
    if event_type in ("lead.created", "lead.updated"):
        return [(Chunk.Source.LEAD, str(payload.get("lead_id") or entity_id))]
    return []


SOURCE_MODELS: dict[str, type[models.Model]] = {
    Chunk.Source.PRODUCT: Product,
    Chunk.Source.ARTICLE: KnowledgeArticle,
    Chunk.Source.CONTACT: Contact,
    Chunk.Source.LEAD: Lead,
}


def named_sources(event: eventbus.Event) -> list[tuple[type[models.Model], object]]:
    """Every row the event names (its sources, and a merge's other contact), by model: the
    handler checks they are all the event's organization's before indexing any."""
    named: list[tuple[type[models.Model], object]] = [
        (SOURCE_MODELS[kind], source_id)
        for kind, source_id in sources_of(event.event_type, event.payload, event.entity_id)
        if kind in SOURCE_MODELS
    ]
    if event.event_type == "contact.merged":
        named.append((Contact, event.payload.get("from_contact_id")))
    return named


def index_sources(event: eventbus.Event) -> None:
    if event.event_type == "contact.merged":
        merged_away = _uuid(event.payload.get("from_contact_id"))
        if merged_away is not None:
            contact_chunks_delete(organization_id=event.organization_id, contact_id=merged_away)
    for kind, named in sources_of(event.event_type, event.payload, event.entity_id):
        source_id = _product_pk(event.organization_id, named) if kind == "product" else named
        if source_id and source_id != "None":
            source_index(organization_id=event.organization_id, kind=kind, source_id=source_id)


def _product_pk(organization_id: uuid.UUID, product_id: str) -> str:
    """The CRM product's id for a synced product named by its id or by its Nuvemshop id."""
    if _uuid(product_id) is not None or not product_id.isdigit():
        return product_id
    pk = (
        Product.objects.filter(organization_id=organization_id, ns_product_id=int(product_id))
        .values_list("pk", flat=True)
        .first()
    )
    return str(pk) if pk else ""


def _uuid(value: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None
