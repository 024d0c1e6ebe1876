"""The CRM's knobs, read from `settings.CRM` at call time (tests override them).

Environment names are in deskcomm/settings.py (`CRM_*`).
"""

from __future__ import annotations

from core.conf import AppSettings


class CrmSettings(AppSettings, namespace="CRM"):
    """Each `settings.CRM` knob with its type and default."""

    # WhatsApp's customer-service window: free-form messages within this many hours of the
    # contact's last message (the send worker, the AI responder, csat-trigger).
    WINDOW_HOURS: float = 24.0
    # Whole-message keywords with which a contact blocked by STOP opts back in (accent- and
    # case-insensitive, like the stop keywords).
    START_KEYWORDS: tuple[str, ...] = ("start", "voltar", "assinar")
    # sla-tracker: a conversation opened must get its first answer, and be resolved, within.
    SLA_FIRST_RESPONSE_SECONDS: float = 15 * 60.0
    SLA_RESOLUTION_SECONDS: float = 24 * 3600.0
    # csat-trigger: the question sent after a resolution or a fulfilment ("" turns it off).
    CSAT_QUESTION: str = "De 1 a 5, como você avalia o nosso atendimento? Responda só com o número."
    # template-suggester / the AI responder outside the window: the template to suggest.
    REENGAGE_TEMPLATE: str = (
        "Olá! Vimos que você falou com a gente. Podemos continuar o atendimento por aqui?"
    )
    # analytics-aggregator: how long a counted event is remembered (its redelivery window).
    ANALYTICS_DEDUP_DAYS: float = 7.0


crm_settings = CrmSettings()
