"""Tell a human when work dies or operations go wrong: an ERROR log line, then the hooks."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from django.utils.module_loading import import_string

from eventbus.claim import DeadDelivery
from eventbus.conf import bus_settings

logger = logging.getLogger(__name__)

DeadLetterHook = Callable[[Sequence[DeadDelivery]], None]


def notify_dead(dead: Sequence[DeadDelivery]) -> None:
    """Log each dead delivery at ERROR and call every hook in EVENTBUS["DEAD_LETTER_HOOKS"].

    A failing hook is logged and never stops the others (nor the worker).
    """
    if not dead:
        return
    for letter in dead:
        logger.error(
            "delivery %s dead after %d attempt(s): consumer=%s event_id=%s organization_id=%s: %s",
            letter.delivery_id,
            letter.attempts,
            letter.consumer,
            letter.event_id,
            letter.organization_id,
            letter.error,
            extra={
                "delivery_id": letter.delivery_id,
                "event_id": str(letter.event_id),
                "consumer": letter.consumer,
                "organization_id": str(letter.organization_id),
                "attempt": letter.attempts,
            },
        )
    for path in bus_settings.DEAD_LETTER_HOOKS:
        _call_hook(path, dead)


def _call_hook(path: str, dead: Sequence[DeadDelivery]) -> None:
    try:
        hook: DeadLetterHook = import_string(path)
        hook(dead)
    except Exception:
        logger.exception("dead-letter hook %s failed", path)


AlertHook = Callable[[str, Mapping[str, object]], None]


def alert(subject: str, **details: object) -> None:
    """Tell a human about an operational problem (a failed cron run, a growing DLQ).

    Logged at ERROR with the details as structured keys, then passed to every callable in
    EVENTBUS["ALERT_HOOKS"] (`fn(subject, details)`); a failing hook never stops the others.
    """
    logger.error("ALERT: %s %s", subject, details, extra={"alert": subject, **details})
    for path in bus_settings.ALERT_HOOKS:
        try:
            hook: AlertHook = import_string(path)
            hook(subject, details)
        except Exception:
            logger.exception("alert hook %s failed", path)
