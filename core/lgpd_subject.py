"""The data subject of an LGPD request: who they are (identifiers), what is theirs, and the
scrubber. In core so that every app's data categories (core.lgpd_registry) can query with it.

Rows to scrub are *found* with strong identifiers only (full name, e-mail, phone and CPF in their
usual spellings), so another person who shares a surname is never touched; *inside* a found row
the scrubber also removes name parts and anything shaped like a CPF, an e-mail or a phone.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

REDACTED = "[redacted]"
MIN_NAME_PART = 3
# Portuguese name particles: too common to scrub on their own.
NAME_PARTICLES = frozenset({"das", "dos", "del", "von", "van"})
CPF_RE = re.compile(r"\b\d{3}\.?\d{3}\.?\d{3}-?\d{2}\b")
EMAIL_RE = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# Brazilian phones, with or without +55, area code and separators (free text only: in JSON values
# a looser pattern would eat dates and ids).
PHONE_RE = re.compile(r"(?:\+?55[\s.-]?)?\(?\b\d{2}\)?[\s.-]?9?\d{4}[\s.-]?\d{4}\b")


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def phone_variants(phone: str) -> set[str]:
    digits = _digits(phone)
    if not digits:
        return set()
    variants = {phone, digits}
    if digits.startswith("55") and len(digits) > 11:
        variants.add(digits[2:])
    return variants


def cpf_variants(cpf: str) -> set[str]:
    digits = _digits(cpf)
    if len(digits) != 11:
        return {cpf} if cpf else set()
    return {cpf, digits, f"{digits[:3]}.{digits[3:6]}.{digits[6:9]}-{digits[9:]}"}


class SubjectContact(Protocol):
    """What a subject's record offers: `crm.models.Contact` (core cannot import the CRM)."""

    @property
    def pk(self) -> Any: ...
    @property
    def organization_id(self) -> Any: ...
    @property
    def name(self) -> str: ...
    @property
    def email(self) -> str: ...
    @property
    def phone(self) -> str: ...
    @property
    def cpf(self) -> str: ...


@dataclass
class Subject:
    """A contact as a data subject: identifiers to search for and the ids of their records."""

    contact: SubjectContact
    identifiers: tuple[str, ...]
    name_parts: tuple[str, ...]
    # Ids of the subject's own records (contact, conversations, messages, leads, orders...):
    # events about any of them concern the subject.
    entity_ids: set[uuid.UUID] = field(default_factory=set)

    @classmethod
    def of(cls, contact: SubjectContact) -> Subject:
        found: set[str] = set()
        found |= {contact.name, contact.email} - {""}
        found |= phone_variants(contact.phone)
        found |= cpf_variants(contact.cpf)
        parts = [p for p in re.split(r"\s+", contact.name) if _is_name_part(p)]
        # Longest first, so "Maria Silva" goes before "Maria" leaves "[redacted] Silva".
        identifiers = tuple(sorted((i for i in found if len(i) >= MIN_NAME_PART), key=len)[::-1])
        return cls(contact, identifiers, tuple(sorted(set(parts), key=len, reverse=True)))

    def scrub(self, text: str, *, free_text: bool = True) -> str:
        """The text without the subject's identifiers (and, in free text, any phone/CPF/e-mail)."""
        if not text:
            return text
        for value in (*self.identifiers, *self.name_parts):
            text = re.sub(re.escape(value), REDACTED, text, flags=re.IGNORECASE)
        text = CPF_RE.sub(REDACTED, EMAIL_RE.sub(REDACTED, text))
        return PHONE_RE.sub(REDACTED, text) if free_text else text

    def scrub_json(self, value: Any) -> Any:
        """A JSON value with every string scrubbed (keys kept: they are field names)."""
        if isinstance(value, str):
            return self.scrub(value, free_text=False)
        if isinstance(value, list):
            return [self.scrub_json(item) for item in value]
        if isinstance(value, dict):
            return {key: self.scrub_json(item) for key, item in value.items()}
        return value

    def mentions(self, text: str) -> bool:
        lowered = text.lower()
        return any(value.lower() in lowered for value in self.identifiers)


def _is_name_part(part: str) -> bool:
    return len(part) >= MIN_NAME_PART and part.lower() not in NAME_PARTICLES
