"""Which apps' tables a backup counts and its restore check compares (core.backup).

Each app whose data a restore must bring back registers its label from its AppConfig.ready
(`count_after_restore(self.label)`), so core names no upper app: today core, jobs, crm, eventbus
and webhooks. Standard library only: every process's start-up fills it.
"""

from __future__ import annotations

_labels: list[str] = []


def count_after_restore(label: str) -> None:
    """Count the tables of app `label` in every backup, and compare them after a restore."""
    if label not in _labels:
        _labels.append(label)


def labels() -> tuple[str, ...]:
    """The registered app labels, in registration order."""
    return tuple(_labels)
