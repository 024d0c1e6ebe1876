"""The LGPD app's event types: consents, data subjects' requests and what was done about them.

None is open to the API or to pipelines: `lgpd.data_request_received` opens an export (D+7) or an
irreversible redaction (D+15), and the others record what the platform did for a data subject.
Requests come in through the LGPD API (scope `lgpd:write`), the DPO's admin, or the shop's
signed webhooks; never as an event someone else emits.
"""

from __future__ import annotations

import datetime as dt

from eventbus.store import catalog

SEED = "seed 000 §3"

catalog.declare_all(
    {
        "lgpd.consent_changed": ("contact_id", "consent_type", "granted", "source"),
        "lgpd.data_request_received": ("request_id", "request_type", "contact_id", "channel"),
        "lgpd.redact_applied": ("request_id", "contact_id", "scope"),
    },
    description=SEED,
)

# Seed 000's v1 carried `export_url_signed`, a bearer link to the subject's whole export, to
# every consumer and webhook. v2 holds ids, states and dates only; the link goes to the data
# subject by e-mail (lgpd.services).
catalog.declare(
    "lgpd.export_generated",
    required=("request_id", "export_url_signed", "expires_at"),
    description="seed 000 §3 (superseded: it broadcast the download link)",
    superseded_on=dt.date(2026, 12, 1),
)
catalog.declare(
    "lgpd.export_generated",
    version=2,
    required=("request_id", "expires_at", "link_sent"),
    description="an access request's export is ready (no link: it is e-mailed to the subject)",
)
