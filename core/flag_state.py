"""Whether a feature flag (core.flags: the catalog and its validation) is on for an organization.
Apart from the catalog because it reads the organization's row: `core.models` validates its
field with the catalog, so the catalog imports no model."""

from __future__ import annotations

import uuid

from core.flags import FLAGS
from core.models import Organization


def enabled(organization_id: uuid.UUID | str, name: str) -> bool:
    """Whether flag `name` is on for the organization (its default when not set)."""
    flag = FLAGS[name]  # a KeyError here is a typo in the caller, not a tenant's data
    stored = (
        Organization.objects.filter(pk=organization_id)
        .values_list("feature_flags", flat=True)
        .first()
    )
    value = (stored or {}).get(name, flag.default)
    return value if isinstance(value, bool) else flag.default
