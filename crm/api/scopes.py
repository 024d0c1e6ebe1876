"""The API key scopes of the CRM endpoints (loaded by CrmConfig.ready)."""

from __future__ import annotations

from core.scopes import declare

LEADS_READ = declare("leads:read", "List and read leads and their activities.")
LEADS_WRITE = declare(
    "leads:write",
    "Create, update, move, assign, close (won/lost) and delete leads, record lead activities "
    "(implies leads:read).",
)
MESSAGES_SEND = declare(
    "messages:send", "Send a message to a contact (POST /api/v1/contacts/<id>/messages)."
)
