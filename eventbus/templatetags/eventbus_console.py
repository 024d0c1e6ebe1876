"""Template filters of the operations console: the same helpers the model admins' columns use
(eventbus.admin.rendering), so a consumer or a traceback reads alike on every page.

    {% load eventbus_console %}
    {{ delivery|consumer }}    the consumer's label (run the rows through rendering.labelled)
    {{ attempt.traceback|traceback }}    collapsed, the innermost frame's file:line in view
"""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString

from eventbus.admin import rendering
from eventbus.store.consumer_labels import ConsumerLabel

register = template.Library()


@register.filter
def consumer(value: Any) -> SafeString | str:
    """A consumer label, or a row with a `consumer` name (labelled or not)."""
    if isinstance(value, ConsumerLabel):
        return rendering.consumer(value)
    return rendering.consumer_of(value)


@register.filter
def traceback(text: str | None) -> SafeString | str:
    return rendering.traceback(text)


@register.filter
def short_id(value: Any) -> SafeString:
    return rendering.short_id(value)
