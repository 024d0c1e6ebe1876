"""A person's identifiers as the CRM compares them (`ContactIdentity` keys).

- phone: E.164 (`+5511987654321`). A Brazilian mobile written with or without its ninth digit
  (`+55 11 9 8765-4321`, the legacy `+55 11 8765-4321`, WhatsApp's `551187654321@c.us`) is one
  key: an 8-digit subscriber number starting 6-9 (a mobile before the ninth digit) gets its 9.
  Landlines (2-5) keep 8 digits. Numbers without a country code are taken as Brazilian.
- email: trimmed, lower case.
- whatsapp_lid: a WhatsApp privacy id (`<n>@lid`, no phone number in it).
- nuvemshop: `<store id>:<customer id>`.
- cpf: the CPF's blind index (never the CPF in clear).
"""

from __future__ import annotations

from dataclasses import dataclass

from core import crypto
from crm.models import Contact, ContactIdentity, cpf_digits

Kind = ContactIdentity.Kind
BRAZIL = "55"
MIN_PHONE_DIGITS = 8
MAX_PHONE_DIGITS = 15  # E.164
LID_SERVER = "@lid"
PHONE_SERVERS = ("@c.us", "@s.whatsapp.net")


def normalize_phone(raw: str) -> str:
    """The phone in E.164 with Brazil's ninth digit ("" when it is not a phone number)."""
    digits = "".join(c for c in raw if c.isdigit())
    if raw.strip().startswith("00"):
        digits = digits[2:]
    if len(digits) in (10, 11) and not raw.strip().startswith("+"):
        digits = BRAZIL + digits  # a national number: area code + subscriber
    if digits.startswith(BRAZIL) and len(digits) in (12, 13):
        area, subscriber = digits[2:4], digits[4:]
        if len(subscriber) == 8 and subscriber[0] in "6789":
            subscriber = "9" + subscriber  # a mobile written before the ninth digit
        digits = BRAZIL + area + subscriber
    if not MIN_PHONE_DIGITS <= len(digits) <= MAX_PHONE_DIGITS:
        return ""
    return f"+{digits}"


def normalize_email(raw: str) -> str:
    value = raw.strip().lower()
    return value if "@" in value and " " not in value else ""


def chat_phone(chat_id: str) -> str:
    """The E.164 phone of a WhatsApp chat id (`5511...@c.us`); "" for a lid or a group."""
    if not chat_id.endswith(PHONE_SERVERS):
        return ""
    return normalize_phone("+" + chat_id.split("@", 1)[0])


def cpf_key(raw: str) -> str:
    digits = cpf_digits(raw)
    return crypto.blind_index(Contact.CPF_CONTEXT, digits) if digits else ""


@dataclass(frozen=True)
class Identity:
    kind: str
    value: str


def identities(
    *,
    phone: str = "",
    email: str = "",
    whatsapp_chat_id: str = "",
    nuvemshop_customer: str = "",
    cpf: str = "",
) -> list[Identity]:
    """The normalized keys of a person's identifiers, strongest first (channel ids, then
    e-mail, CPF, phone); the empty ones left out, each key once."""
    found: list[Identity] = []
    if whatsapp_chat_id.endswith(LID_SERVER):
        found.append(Identity(Kind.WHATSAPP_LID, whatsapp_chat_id))
    if nuvemshop_customer:
        found.append(Identity(Kind.NUVEMSHOP, nuvemshop_customer))
    if value := normalize_email(email):
        found.append(Identity(Kind.EMAIL, value))
    if value := cpf_key(cpf):
        found.append(Identity(Kind.CPF, value))
    for value in (normalize_phone(phone), chat_phone(whatsapp_chat_id)):
        if value:
            found.append(Identity(Kind.PHONE, value))
    return list(dict.fromkeys(found))


def contact_identities(contact: Contact) -> list[Identity]:
    """The keys a contact's own fields give (its phone, e-mail, CPF)."""
    return identities(phone=contact.phone, email=contact.email, cpf=contact.cpf)
