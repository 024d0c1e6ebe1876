"""The API key scopes of the LGPD endpoints (loaded by LgpdConfig.ready)."""

from __future__ import annotations

from core.scopes import declare

LGPD_READ = declare("lgpd:read", "List and read LGPD data-subject requests.")
LGPD_WRITE = declare("lgpd:write", "Create LGPD data-subject requests (access or redaction).")
CONSENTS_READ = declare("consents:read", "List a contact's consent records.")
CONSENTS_WRITE = declare(
    "consents:write", "Record a contact's consent given or withdrawn (implies consents:read)."
)
