"""Tell a human about an operational problem: an ERROR log line, then the alert hooks."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from django.conf import settings
from django.utils.module_loading import import_string

logger = logging.getLogger(__name__)

AlertHook = Callable[[str, Mapping[str, object]], None]


def alert(subject: str, **details: object) -> None:
    """Tell a human about an operational problem (a failed cron run, a growing DLQ).

    Logged at ERROR with the details as structured keys, then passed to every callable in
    the ALERT_HOOKS setting (`fn(subject, details)`, env EVENTBUS_ALERT_HOOKS); a failing hook
    never stops the others.
    """
    logger.error("ALERT: %s %s", subject, details, extra={"alert": subject, **details})
    for path in getattr(settings, "ALERT_HOOKS", []):
        try:
            hook: AlertHook = import_string(path)
            hook(subject, details)
        except Exception:
            logger.exception("alert hook %s failed", path)
