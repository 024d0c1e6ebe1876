"""The operations console in the Django admin: DLQ, event and delivery browsers, status page,
correlation view. Importing this package registers the model admins."""

from __future__ import annotations

from eventbus.admin import dlq, events

__all__ = ["dlq", "events"]
