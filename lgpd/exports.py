"""Export bundles: build the JSON, store it privately, and the single-use link to it.

Three ways lead to the file, each audited by the view that serves it: the admin, the API (a key
with `lgpd:read` of the same organization) and the link e-mailed to the data subject. The link
is a random token used once, until the export's download period (EXPORT_LINK_DAYS) ends; only
its SHA-256 is stored. It never travels on the bus. Whatever the storage, the link is ours: S3
presigned URLs cannot live 30 days (SigV4 caps them at 7), so on S3 the views answer with a
short-lived presigned redirect instead of streaming the file.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, Storage, storages
from django.core.serializers.json import DjangoJSONEncoder
from django.urls import reverse
from django.utils import timezone

from core.lgpd_registry import REGISTRY
from core.lgpd_subject import Subject
from lgpd.conf import lgpd_settings
from lgpd.models import DataRequest

STORAGE_ALIAS = "lgpd_exports"
FORMAT_VERSION = 1
PRESIGNED_SECONDS = 3600  # seed 001: exports' signed URLs live an hour once the link is used


class InvalidLink(Exception):
    """A download token that no request holds (forged, or replaced by a newer link)."""


class Unavailable(Exception):
    """The export cannot be downloaded (any more): not generated, deleted, expired, link used."""


def export_storage() -> Storage:
    return storages[STORAGE_ALIAS]


def bundle(request: DataRequest, subject: Subject) -> dict[str, Any]:
    """Everything held about the subject, one key per data category."""
    return {
        "format_version": FORMAT_VERSION,
        "data_request_id": str(request.id),
        "organization_id": str(request.organization_id),
        "contact_id": str(subject.contact.pk),
        "generated_at": timezone.now().isoformat(),
        "categories": {category.name: category.export(subject) for category in REGISTRY},
    }


def store(request: DataRequest, document: dict[str, Any]) -> tuple[str, str]:
    """Write the bundle under a fixed name (a re-run replaces it); returns (name, SHA-256)."""
    content = json.dumps(document, cls=DjangoJSONEncoder, ensure_ascii=False, indent=1).encode()
    name = f"{request.organization_id}/{request.id}.json"
    storage = export_storage()
    if storage.exists(name):
        storage.delete(name)
    saved = storage.save(name, ContentFile(content))
    return saved, hashlib.sha256(content).hexdigest()


def erase(request: DataRequest) -> bool:
    """Delete a stored export (a redaction leaves no copy of the subject's data behind)."""
    if not request.export_name:
        return False
    storage = export_storage()
    if storage.exists(request.export_name):
        storage.delete(request.export_name)
    return True


def link_expiry(generated_at: dt.datetime) -> dt.datetime:
    return generated_at + lgpd_settings.days("EXPORT_LINK_DAYS")


def new_link_token() -> tuple[str, str]:
    """A fresh single-use token and the SHA-256 to store (the token itself is never stored)."""
    token = secrets.token_urlsafe(32)
    return token, token_hash(token)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def link_url(token: str) -> str:
    """The absolute link that downloads an export once (sent to the data subject only)."""
    path = reverse("lgpd-export-download", kwargs={"token": token})
    return f"{lgpd_settings.PUBLIC_BASE_URL.rstrip('/')}{path}"


def api_url(request: DataRequest) -> str:
    """The authenticated API path of an export (a key with `lgpd:read` is needed to use it)."""
    path = reverse("lgpd-data-request-export", kwargs={"request_id": request.pk})
    return f"{lgpd_settings.PUBLIC_BASE_URL.rstrip('/')}{path}"


def check_available(request: DataRequest, *, now: dt.datetime | None = None) -> None:
    """Raise Unavailable unless the request's export file can be downloaded now."""
    if not request.export_name:
        raise Unavailable("this request has no export (yet)")
    if request.export_deleted_at is not None:
        raise Unavailable(f"this export was deleted ({request.export_deleted_reason or 'erased'})")
    expires = request.export_expires_at
    if expires is not None and (now or timezone.now()) >= expires:
        raise Unavailable("this export's download period has ended")


def is_local(storage: Storage) -> bool:
    return isinstance(storage, FileSystemStorage)


def presigned_url(name: str) -> str:
    """A short-lived URL of the object on S3 (django-storages' `url(name, expire=...)`)."""
    storage: Any = export_storage()
    return str(storage.url(name, expire=PRESIGNED_SECONDS))
