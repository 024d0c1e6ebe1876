"""Secret header values of pipeline definitions: encrypted at rest, write-only, masked.

An `http-request` header is secret when its node lists it in `config.secretHeaders` or when its
name says so (token, key, secret, auth, password, cookie, signature). Its value never stays in
`Pipeline.definition`: the definition keeps `MASK` in its place and the values live in
`Pipeline.secret_headers_encrypted`, one Fernet token (`core.crypto`, context
`pipeline_secrets`, key ENCRYPTION_KEYS_PIPELINES) of `{node id: {header: value}}`. So the API, the
admin and the audit log only ever see the mask. A definition sent back with `MASK` for a secret
header keeps the stored value; a new value replaces it. The engine runs `restore(definition,
secrets)`. `redact_url` hides the values of a rendered URL's query string in step excerpts.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from core import crypto

CONTEXT = "pipeline_secrets"
MASK = "********"
SECRET_WORDS = ("auth", "token", "key", "secret", "password", "cookie", "signature")
Secrets = dict[str, dict[str, str]]


class MaskedWithoutSecret(ValueError):
    """A header holds MASK but no value is stored for it."""

    def __init__(self, node: str, header: str) -> None:
        self.node = node
        super().__init__(
            f"config.headers.{header} is {MASK!r} but no secret is stored for it: send the value"
        )


def is_secret(header: str, declared: object = ()) -> bool:
    """Whether `header` is secret: listed in the node's `secretHeaders`, or a secret-like name."""
    names = {str(d).lower() for d in declared} if isinstance(declared, list) else set()
    lowered = header.lower()
    return lowered in names or any(word in lowered for word in SECRET_WORDS)


def _http_nodes(definition: Any) -> list[dict[str, Any]]:
    nodes = definition.get("nodes") if isinstance(definition, Mapping) else None
    if not isinstance(nodes, list):
        return []
    return [
        n
        for n in nodes
        if isinstance(n, dict)
        and n.get("type") == "http-request"
        and isinstance(n.get("id"), str)
        and isinstance(n.get("config"), dict)
        and isinstance(n["config"].get("headers"), dict)
    ]


def restore(definition: Any, secrets: Secrets) -> Any:
    """`definition` with each masked header's stored value put back (a copy). Raises
    MaskedWithoutSecret for a mask with nothing stored behind it."""
    full = copy.deepcopy(definition)
    for node in _http_nodes(full):
        headers = node["config"]["headers"]
        for name, value in headers.items():
            if value == MASK:
                stored = secrets.get(node["id"], {}).get(name)
                if stored is None:
                    raise MaskedWithoutSecret(node["id"], name)
                headers[name] = stored
    return full


def split(definition: Any) -> tuple[Any, Secrets]:
    """(the definition with every secret header value masked, the values by node and header)."""
    masked = copy.deepcopy(definition)
    found: Secrets = {}
    for node in _http_nodes(masked):
        declared = node["config"].get("secretHeaders", [])
        headers = node["config"]["headers"]
        for name in list(headers):
            if is_secret(name, declared) and isinstance(headers[name], str):
                found.setdefault(node["id"], {})[name] = headers[name]
                headers[name] = MASK
    return masked, found


def mask_source(source: str, found: Secrets, masked: Any) -> str | None:
    """`source` (the author's JSON text) with every secret header value in `found` replaced by
    MASK, layout and key order kept; None unless the result reads back exactly as `masked` (a
    value spelled with escapes, or the same string elsewhere in the text: the caller then
    stores the masked definition re-indented instead, never a secret)."""
    text = source
    for headers in found.values():
        for value in headers.values():
            for spelled in {json.dumps(value), json.dumps(value, ensure_ascii=False)}:
                text = text.replace(spelled, json.dumps(MASK))
    try:
        return text if json.loads(text) == masked else None
    except ValueError:
        return None


def seal(secrets: Secrets) -> str:
    return crypto.encrypt(CONTEXT, json.dumps(secrets, sort_keys=True)) if secrets else ""


def unseal(token: str) -> Secrets:
    if not token:
        return {}
    value = json.loads(crypto.decrypt(CONTEXT, token))
    return value if isinstance(value, dict) else {}


def redacted_headers(headers: Mapping[str, str], declared: object = ()) -> dict[str, str]:
    """Headers for an excerpt: secret values masked."""
    return {k: (MASK if is_secret(k, declared) else v) for k, v in headers.items()}


def redact_url(url: str) -> str:
    """`url` with the value of every query parameter (and any user:password) replaced by MASK,
    names kept: what a step excerpt may show."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(name, MASK) for name, _ in pairs], safe="*") if pairs else MASK
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
