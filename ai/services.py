"""AI app write services that are not a worker's: knowledge-base edits."""

from __future__ import annotations

from django.db import transaction

import eventbus
from ai.models import KnowledgeArticle


def article_changed(*, article: KnowledgeArticle, action: str) -> None:
    """Emit `knowledge.article_changed` (saved | deleted) in the caller's transaction."""
    eventbus.emit(
        "knowledge.article_changed",
        organization=article.organization_id,
        entity_kind="knowledge_article",
        entity_id=article.pk,
        payload={"article_id": str(article.pk), "action": action},
    )


def article_save(*, article: KnowledgeArticle) -> KnowledgeArticle:
    """Save an article and ask the indexer to re-index it, in one transaction."""
    with transaction.atomic():
        article.save()
        article_changed(article=article, action="saved")
    return article


def article_delete(*, article: KnowledgeArticle) -> None:
    """Delete an article; the indexer then deletes its chunks."""
    with transaction.atomic():
        article_changed(article=article, action="deleted")
        article.delete()
