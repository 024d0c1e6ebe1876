"""Tell a human about an operational problem: an ERROR log line, mail to ADMINS, the alert
webhook (ALERT_WEBHOOK_URL, Slack-compatible), then the alert hooks."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from django.conf import settings
from django.core.mail import mail_admins
from django.utils.module_loading import import_string

logger = logging.getLogger(__name__)

AlertHook = Callable[[str, Mapping[str, object]], None]
WEBHOOK_TIMEOUT = 5.0


def alert(subject: str, **details: object) -> None:
    """Tell a human about an operational problem (a failed cron run, a growing DLQ).

    Logged at ERROR with the details as structured keys; mailed to ADMINS (none: no mail) and,
    when ALERT_WEBHOOK_URL is set, posted there as `{"text": ...}` through the SSRF-guarded
    client; then passed to every callable in the ALERT_HOOKS setting (`fn(subject, details)`,
    env EVENTBUS_ALERT_HOOKS). A failing destination never stops the others, nor the caller.
    """
    logger.error("ALERT: %s %s", subject, details, extra={"alert": subject, **details})
    text = alert_text(subject, details)
    try:
        mail_admins(subject, text)
    except Exception:
        logger.exception("alert: mail to ADMINS failed")
    url = getattr(settings, "ALERT_WEBHOOK_URL", "")
    if url:
        post_webhook(url, text, label="alert")
    for path in getattr(settings, "ALERT_HOOKS", []):
        try:
            hook: AlertHook = import_string(path)
            hook(subject, details)
        except Exception:
            logger.exception("alert hook %s failed", path)


def alert_text(subject: str, details: Mapping[str, object]) -> str:
    """The mail and webhook body: the caller's `text` when it wrote one, else the details."""
    if "text" in details:
        return str(details["text"])
    return "\n".join([subject, *(f"{key}: {value}" for key, value in details.items())])


def post_webhook(url: str, text: str, *, label: str) -> None:
    """POST `{"text": text}` to a Slack-compatible incoming webhook; failures are logged (never
    the URL: it is a secret), not raised."""
    import httpx  # with core.http ~11 MB: only a process that posts an alert needs them

    from core.http import guarded_client

    try:
        with guarded_client(timeout=WEBHOOK_TIMEOUT) as client:
            response = client.post(url, json={"text": text})
    except httpx.HTTPError as exc:
        logger.error("%s: webhook failed: %s", label, exc)
        return
    if not response.is_success:
        logger.error("%s: webhook answered HTTP %d", label, response.status_code)
