"""Export bundles: build the JSON, store it privately, and the signed link that downloads it.

The link is ours (a Django view verifying a signed token, valid EXPORT_LINK_DAYS) whatever the
storage: S3 presigned URLs cannot live 30 days (SigV4 caps them at 7), so on S3 the view answers
with a short-lived presigned redirect instead of streaming the file.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any

from django.core import signing
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, Storage, storages
from django.core.serializers.json import DjangoJSONEncoder
from django.urls import reverse
from django.utils import timezone

from lgpd.categories import REGISTRY
from lgpd.conf import lgpd_settings
from lgpd.models import DataRequest
from lgpd.subject import Subject

STORAGE_ALIAS = "lgpd_exports"
SIGNING_SALT = "lgpd.export-download"  # a namespace for the signer, not a secret
FORMAT_VERSION = 1
PRESIGNED_SECONDS = 3600  # seed 001: exports' signed URLs live an hour once the link is used


class InvalidLink(Exception):
    """A download token that is forged, for another purpose, or for an erased export."""


class ExpiredLink(Exception):
    """A genuine download token past its validity (EXPORT_LINK_DAYS)."""


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


def download_url(request: DataRequest) -> str:
    """The signed link (absolute) that downloads the request's export until it expires."""
    token = signing.dumps(str(request.id), salt=SIGNING_SALT)
    path = reverse("lgpd-export-download", kwargs={"token": token})
    return f"{str(lgpd_settings.PUBLIC_BASE_URL).rstrip('/')}{path}"


def request_for_token(token: str) -> DataRequest:
    """The request whose export a token downloads; raises InvalidLink or ExpiredLink."""
    max_age = lgpd_settings.days("EXPORT_LINK_DAYS")
    try:
        request_id = signing.loads(token, salt=SIGNING_SALT, max_age=max_age)
    except signing.SignatureExpired:
        raise ExpiredLink("this download link has expired") from None
    except signing.BadSignature:
        raise InvalidLink("not a valid download link") from None
    found = DataRequest.objects.filter(pk=request_id).first()
    if found is None or not found.export_name or found.export_deleted_at is not None:
        raise InvalidLink("this export no longer exists")
    if found.export_expires_at is not None and timezone.now() > found.export_expires_at:
        raise ExpiredLink("this download link has expired")
    return found


def is_local(storage: Storage) -> bool:
    return isinstance(storage, FileSystemStorage)


def presigned_url(name: str) -> str:
    """A short-lived URL of the object on S3 (django-storages' `url(name, expire=...)`)."""
    storage: Any = export_storage()
    return str(storage.url(name, expire=PRESIGNED_SECONDS))
