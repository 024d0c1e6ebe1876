"""The Nuvemshop knobs, read from `settings.NUVEMSHOP` at call time (env names:
deskcomm/settings.py). Hosts are settings so tests point them at the loopback fake."""

from __future__ import annotations

from core.conf import AppSettings


class NuvemshopSettings(AppSettings, namespace="NUVEMSHOP"):
    """Each `settings.NUVEMSHOP` knob with its type and default."""

    APP_ID: str = ""
    CLIENT_SECRET: str = ""  # also the key of the webhooks' x-linkedstore-hmac-sha256
    AUTHORIZE_URL: str = "https://www.nuvemshop.com.br/apps/{app_id}/authorize"
    TOKEN_URL: str = "https://www.nuvemshop.com.br/apps/authorize/token"  # noqa: S105  (a URL)
    API_BASE_URL: str = "https://api.nuvemshop.com.br/v1"
    # The docs require a User-Agent naming the app and a contact (400 without it).
    USER_AGENT: str = "Deskcomm CRM (ops@deskcomm.invalid)"
    # Public https base of this service: webhooks are registered at <base>/api/webhooks/...
    WEBHOOK_BASE_URL: str = ""
    # Shared by every worker process of a store (seed 000 §6.4): requests per window.
    RATE_LIMIT_REQUESTS: int = 300
    RATE_LIMIT_WINDOW_SECONDS: float = 60.0
    MAX_RATE_WAIT_SECONDS: float = 120.0  # a request waits this long for a token, then retries
    PER_PAGE: int = 100  # the API allows up to 200
    CONNECT_TIMEOUT: float = 5.0
    TIMEOUT: float = 30.0
    ALLOW_PRIVATE_HOSTS: bool = False  # development and tests only (a loopback fake)
    LEAD_WON_ON_PAID: bool = True  # a paid order closes the contact's open lead as won
    HEALTH_ALERT_AFTER_FAILURES: int = 2
    CART_LOOKBACK_HOURS: float = 24.0


nuvemshop_settings = NuvemshopSettings()

# The webhooks the CRM registers on install (and keeps registered: list, create, update).
STORE_WEBHOOK_EVENTS = (
    "app/uninstalled",
    "app/suspended",
    "app/resumed",
    "order/created",
    "order/updated",
    "order/paid",
    "order/cancelled",
    "order/fulfilled",
    "product/created",
    "product/updated",
    "product/deleted",
)
# Set in the partner dashboard (not through the API); received at the same receiver.
LGPD_WEBHOOK_EVENTS = ("store/redact", "customers/redact", "customers/data_request")
