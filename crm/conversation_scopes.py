"""The API key scopes of the conversation and analytics endpoints (loaded by CrmConfig.ready)."""

from __future__ import annotations

from core.scopes import declare

CONVERSATIONS_READ = declare(
    "conversations:read", "List and read conversations (status, assignee, bot state)."
)
CONVERSATIONS_WRITE = declare(
    "conversations:write", "Assign, resolve and reopen conversations (implies read)."
)
ANALYTICS_READ = declare("analytics:read", "Read the organization's daily counters.")
