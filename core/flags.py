"""Per-organization feature flags (seed 001 §5.5): `Organization.feature_flags`, a JSON object of
flag name -> bool, edited in the admin (Organizations) and read only through
`core.flag_state.enabled`.

Every flag is declared here with its default; a flag an organization has not set has its
default, so a new flag needs no data migration. Unknown names and non-boolean values are refused
(`validate_feature_flags`, run by the model's validation and so by the admin form).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError


@dataclass(frozen=True)
class Flag:
    default: bool
    description: str


FLAGS: dict[str, Flag] = {
    "ai_responder": Flag(True, "the AI answers inbound WhatsApp messages (ai-response-worker)"),
    "rag": Flag(True, "the AI's prompts carry knowledge retrieved from the tenant's articles"),
    "pipelines": Flag(True, "the tenant's enabled pipelines run (order.pre, order.post, event.*)"),
}


def validate_feature_flags(value: Any) -> None:
    """A JSON object of declared flag names to true / false; a clear error otherwise."""
    if not isinstance(value, dict):
        raise ValidationError('Feature flags must be a JSON object, e.g. {"rag": false}.')
    unknown = sorted(set(value) - set(FLAGS))
    if unknown:
        raise ValidationError(
            "Unknown feature flag(s): %(unknown)s. Known flags: %(known)s.",
            params={"unknown": ", ".join(unknown), "known": ", ".join(sorted(FLAGS))},
        )
    wrong = sorted(name for name, flag in value.items() if not isinstance(flag, bool))
    if wrong:
        raise ValidationError(
            "Feature flag(s) %(wrong)s must be true or false.", params={"wrong": ", ".join(wrong)}
        )
