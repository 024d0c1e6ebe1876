"""Message attachments past their organization's retention: removed from storage and records.

Only files the product writes are deleted: those under the organization's own prefix of the
default storage (`media_prefix`: `messages/<organization id>/`). `Message.media_urls` is data a
channel (a tenant's own WAHA server) supplies, so a reference elsewhere (another organization's
prefix, a backup or an export, `..`, an absolute path, another host) only leaves the record,
with a warning in the log; its file is never touched.
"""

from __future__ import annotations

import datetime as dt
import logging
import posixpath
import uuid

from django.conf import settings
from django.core.files.storage import default_storage
from django.db.models import Q
from django.utils import timezone

from ai.conf import ai_settings
from ai.models import AiAccount
from core.models import Organization
from crm.models import Message

BATCH = 500
logger = logging.getLogger(__name__)


def media_prefix(organization_id: uuid.UUID) -> str:
    """Where the product stores an organization's message attachments in the default storage."""
    return f"messages/{organization_id}/"


def media_prune(now: dt.datetime | None = None) -> int:
    """Drop `media_urls` of messages older than the retention (AI_MEDIA_RETENTION_DAYS, or the
    organization's own) and delete the files this deployment stores; returns messages changed."""
    now = now or timezone.now()
    own = dict(
        AiAccount.objects.filter(media_retention_days__isnull=False).values_list(
            "organization_id", "media_retention_days"
        )
    )
    changed = 0
    for organization_id in Organization.objects.values_list("pk", flat=True):
        days = own.get(organization_id) or ai_settings.MEDIA_RETENTION_DAYS
        changed += _prune_organization(organization_id, now - dt.timedelta(days=days))
    return changed


def _prune_organization(organization_id: uuid.UUID, cutoff: dt.datetime) -> int:
    old = Message.objects.filter(organization_id=organization_id, created_at__lt=cutoff).exclude(
        Q(media_urls=[])
    )
    changed = 0
    while batch := list(old.order_by("pk")[:BATCH]):
        for message in batch:
            for reference in message.media_urls:
                _delete_stored(organization_id, str(reference))
            message.media_urls = []
        Message.objects.bulk_update(batch, ["media_urls"])
        changed += len(batch)
    return changed


def _delete_stored(organization_id: uuid.UUID, reference: str) -> None:
    """Delete a file of the default storage named by its storage name or its MEDIA_URL, if it is
    under the organization's prefix."""
    name = reference
    media_url = str(settings.MEDIA_URL or "")
    if media_url and name.startswith(media_url):
        name = name[len(media_url) :]
    if "://" in name:  # a file on another host (e.g. the channel's): only the reference goes
        return
    normalized = posixpath.normpath(name.replace("\\", "/")) if name else ""
    if "\x00" in name or not normalized.startswith(media_prefix(organization_id)):
        logger.warning(
            "media-prune: %r is outside the organization's storage prefix; file not deleted",
            reference[:200],
            extra={"organization_id": str(organization_id)},
        )
        return
    if default_storage.exists(normalized):
        default_storage.delete(normalized)
