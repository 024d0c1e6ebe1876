"""The WhatsApp (WAHA) knobs, read from `settings.WHATSAPP` at call time (tests override them).

Environment names are in deskcomm/settings.py. `WAHA_BASE_URL`, `WAHA_API_KEY` and
`WAHA_WEBHOOK_SECRET` are the defaults of a session that leaves its own fields empty (seed 001
§3.2: one self-hosted WAHA for the installation); a session's own values win.
"""

from __future__ import annotations

from core.conf import AppSettings

API_KEY_CONTEXT = "waha_byo"  # core.crypto context of the sessions' API keys and HMAC secrets
SEND_CONSUMER = "whatsapp-send-worker"


class WhatsappSettings(AppSettings, namespace="WHATSAPP"):
    """Each `settings.WHATSAPP` knob with its type and default."""

    BASE_URL: str = ""  # WAHA_BASE_URL, e.g. http://waha:3000
    API_KEY: str = ""  # WAHA_API_KEY (WAHA's X-Api-Key)
    WEBHOOK_SECRET: str = ""  # WAHA_WEBHOOK_SECRET (the HMAC key WAHA signs webhooks with)
    # PUBLIC_BASE_URL: this service as WAHA reaches it (the admin shows <base>/api/webhooks/...);
    # empty: the admin request's own origin.
    PUBLIC_BASE_URL: str = ""
    # A webhook's `timestamp` may be this far from now, either way; its `id` is remembered for
    # twice as long, so a replay inside the window is a duplicate (whatsapp.views).
    WEBHOOK_WINDOW_SECONDS: float = 300.0
    CONNECT_TIMEOUT: float = 3.0
    TIMEOUT: float = 15.0
    # A self-hosted WAHA usually sits on a private network (docker compose): allow it there.
    # Off by default, so an organization's own ("bring your own") URL cannot aim at internal hosts.
    ALLOW_PRIVATE_TARGETS: bool = False
    SEND_ATTEMPTS: int = 8  # the bus's default table (seed R-W2): the send consumer's attempts
    # The longest Retry-After (seconds) a 429/503 from WAHA is honoured for.
    MAX_RETRY_AFTER: float = 600.0
    # Messages still `sending` this long are stuck (recover-stuck-messages).
    STUCK_AFTER_SECONDS: float = 120.0
    # A session FAILED or waiting for a QR scan this long raises an alert (seed 001 A3/A4).
    ALERT_AFTER_SECONDS: float = 300.0
    # Recovery of a send whose worker died mid-request: how many recent chat messages to read,
    # and the clock skew allowed between WAHA's timestamps and ours.
    RECOVERY_LOOKBACK: int = 50
    RECOVERY_SKEW_SECONDS: float = 120.0
    # Contacts who wrote from a `@lid` resolved per session and sync-sessions run (WAHA's lids
    # API), and how long a receipt for a message id not stored (yet) is kept.
    LIDS_PER_RUN: int = 50
    PENDING_ACK_DAYS: float = 2.0
    # Whole-message keywords that block a contact (accent- and case-insensitive).
    STOP_KEYWORDS: tuple[str, ...] = ("stop", "sair", "parar", "cancelar", "descadastrar")
    # The consent a send needs: a contact whose latest record of it is a withdrawal is refused.
    CONSENT_TYPE: str = "marketing_whatsapp"
    # The customer-service window (24 h) is the CRM's knob: crm.conf WINDOW_HOURS.


whatsapp_settings = WhatsappSettings()
