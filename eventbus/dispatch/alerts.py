"""Tell a human when work dies: an ERROR log line per dead delivery, then the dead-letter hooks.

Operational alerts (a failed cron run, a growing DLQ) go through `core.alerts.alert`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from django.utils.module_loading import import_string

from eventbus.dispatch.claim import DeadDelivery
from eventbus.store.conf import bus_settings

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
