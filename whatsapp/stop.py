"""STOP/SAIR: an inbound message that is only a stop keyword blocks the contact (seed 001 §9.5);
START: one that is only a start keyword (`CRM["START_KEYWORDS"]`) unblocks a contact blocked so.

The whole message is compared, accent- and case-insensitively, after trimming spaces and
trailing punctuation: "Sair", "SAIR!" and "parár" match "sair"/"parar"; "quero sair" does not.
"""

from __future__ import annotations

import string
import unicodedata

from crm.conf import crm_settings
from whatsapp.conf import whatsapp_settings

_TRIM = string.whitespace + string.punctuation


def normalized(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return " ".join(plain.casefold().strip(_TRIM).split())


def stop_keyword(text: str) -> str | None:
    """The configured stop keyword this message is, or None."""
    return _keyword(text, whatsapp_settings.STOP_KEYWORDS)


def start_keyword(text: str) -> str | None:
    """The configured start (opt back in) keyword this message is, or None."""
    return _keyword(text, crm_settings.START_KEYWORDS)


def _keyword(text: str, keywords: tuple[str, ...]) -> str | None:
    said = normalized(text)
    if not said:
        return None
    for keyword in keywords:
        if normalized(keyword) == said:
            return normalized(keyword)
    return None
