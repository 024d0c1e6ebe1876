"""The `waha:<session id>` health checks (not required): one per configured session, ok when
its WAHA answers and lists it as WORKING. The public answer names the session by id only (the
health endpoint is unauthenticated; a session's name can say whose it is) and the failure's
class (`SessionNotWorking`); the log line says the session's name and what is wrong."""

from __future__ import annotations

import uuid
from functools import partial

from core import rls
from core.health.registry import Check
from whatsapp import client as waha
from whatsapp.models import WahaSession

PREFIX = "waha"


class SessionNotWorking(Exception):
    """A WAHA session is not WORKING, or its WAHA cannot be reached."""


def session_checks() -> list[Check]:
    """This run's checks: one per session (none before migrate or with no session)."""
    try:
        with rls.scoped(bypass=True):  # the health view has no tenant
            ids = list(WahaSession.objects.order_by("name").values_list("pk", flat=True))
    except Exception:  # no table yet (before migrate): nothing to check
        return []
    return [Check(f"{PREFIX}:{pk}", partial(check_session, pk), required=False) for pk in ids]


def check_session(session_id: uuid.UUID) -> None:
    with rls.scoped(bypass=True):
        session = WahaSession.objects.filter(pk=session_id).first()
    if session is None:
        return  # removed since the run listed it
    with waha.waha_client() as http:
        try:
            listed = {
                s.get("name"): s.get("status")
                for s in waha.sessions(http, session.effective_base_url, session.api_key)
            }
        except waha.WahaError as exc:
            raise SessionNotWorking(f"{session.name}: {exc.code}") from exc
    status = listed.get(session.name, "MISSING")
    if status != "WORKING":
        raise SessionNotWorking(f"{session.name}: {status}")
