"""How the console names a consumer, and whether it is switched off: a hook for higher layers.

The bus knows consumers only by name (`crm-sync-worker`, `webhook:<uuid>`). An app above it whose
consumers are records (webhooks: one per subscription) registers a `ConsumerSource` at start-up,
so the DLQ can show "Order sync (hooks.example.com)" linked to the subscription, warn before
reprocessing into a disabled one, and enable it on the operator's request, without importing it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ConsumerLabel:
    """A consumer as an operator reads it."""

    name: str  # the consumer name in eventbus_delivery.consumer
    title: str  # what to call it ("Order sync"); the name itself for code consumers
    detail: str = ""  # a second line ("hooks.example.com")
    url: str = ""  # where to open it in the admin
    disabled: bool = False  # its deliveries die at once if reprocessed now
    enable_permission: str = ""  # what an admin user needs to switch it back on

    @property
    def is_plain(self) -> bool:
        return self.title == self.name and not self.detail


class ConsumerSource(Protocol):
    """Labels (and can enable) the consumers it owns; ignores the names it does not own."""

    def labels(self, names: Collection[str]) -> dict[str, ConsumerLabel]: ...

    def enable(self, name: str, *, actor: str) -> bool: ...


_sources: list[ConsumerSource] = []


def register(source: ConsumerSource) -> None:
    """Called from a higher app's `ready()`; a second source of the same class is ignored."""
    if not any(type(known) is type(source) for known in _sources):
        _sources.append(source)


def labels(names: Collection[str]) -> dict[str, ConsumerLabel]:
    """A label for every name: a source's when one owns it, the bare name otherwise."""
    found: dict[str, ConsumerLabel] = {}
    for source in _sources:
        found.update(source.labels([n for n in names if n not in found]))
    return {name: found.get(name) or ConsumerLabel(name, name) for name in names}


def disabled(names: Collection[str]) -> list[ConsumerLabel]:
    """The consumers among `names` that are switched off, by title."""
    off = [label for label in labels(names).values() if label.disabled]
    return sorted(off, key=lambda label: label.title)


def enable(names: Collection[str], *, actor: str) -> int:
    """Switch the disabled consumers among `names` back on (each source audits it); how many."""
    return sum(
        1
        for label in disabled(names)
        for source in _sources
        if source.enable(label.name, actor=actor)
    )
