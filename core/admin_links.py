"""Links the core admin pages show into pages of apps above core (the event browser, the dead
letters, a delivery, the correlation view): each app registers its own from its AppConfig.ready,
so core/admin.py reverses no URL name of an upper app. Standard library only.

- `link_organization(label, viewname)`: on an organization's row, a link to `viewname` filtered
  by `?organization=<id>`.
- `link_audit_target(target_type, viewname, label)`: an audit entry whose target is
  `target_type` links to `viewname` with the target id as argument.
- `link_request(viewname)`: an audit entry's request id links to `viewname?request_id=<id>`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Link:
    label: str
    viewname: str


_organization_links: list[Link] = []
_audit_targets: dict[str, Link] = {}
_request_views: list[str] = []


def link_organization(label: str, viewname: str) -> None:
    if Link(label, viewname) not in _organization_links:
        _organization_links.append(Link(label, viewname))


def link_audit_target(target_type: str, viewname: str, label: str) -> None:
    _audit_targets[target_type] = Link(label, viewname)


def link_request(viewname: str) -> None:
    _request_views[:] = [viewname]


def organization_links() -> tuple[Link, ...]:
    return tuple(_organization_links)


def audit_target_link(target_type: str) -> Link | None:
    return _audit_targets.get(target_type)


def request_view() -> str | None:
    return _request_views[0] if _request_views else None
