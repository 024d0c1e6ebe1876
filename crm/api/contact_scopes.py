"""The API key scopes of the contacts endpoints (loaded by CrmConfig.ready)."""

from __future__ import annotations

from core.scopes import declare

CONTACTS_READ = declare("contacts:read", "List and read contacts (GET /api/v1/contacts...).")
CONTACTS_WRITE = declare(
    "contacts:write",
    "Create, update, merge, block and unblock contacts (implies contacts:read).",
)
