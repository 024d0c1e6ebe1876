"""The shop's part of an LGPD redaction: a contact linked to a store customer is redacted in the
shop too (seed 000 §6.6). Nuvemshop's records hold no personal data of their own (no category);
its redaction hook queues the shop-side redaction (core.lgpd_registry)."""

from __future__ import annotations

from core.lgpd_registry import register_redaction_hook
from nuvemshop.services import redaction_propagate

register_redaction_hook("nuvemshop", redaction_propagate)
