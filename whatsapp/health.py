"""The `waha` health check (not required): every configured session's WAHA answers and lists it
as WORKING. One check covers all sessions (the health registry's checks are static); the log
line names each session that is not well, the public answer says `SessionNotWorking`."""

from __future__ import annotations

from core import rls
from whatsapp import client as waha
from whatsapp.models import WahaSession


class SessionNotWorking(Exception):
    """A WAHA session is not WORKING, or its WAHA cannot be reached."""


def configured() -> bool:
    try:
        with rls.scoped(bypass=True):  # the health view has no tenant
            return WahaSession.objects.exists()
    except Exception:  # no table yet (before migrate): nothing to check
        return False


def check_sessions() -> None:
    problems: list[str] = []
    by_server: dict[tuple[str, str], list[WahaSession]] = {}
    with rls.scoped(bypass=True):
        for session in WahaSession.objects.order_by("name"):
            by_server.setdefault((session.effective_base_url, session.api_key), []).append(session)
    with waha.waha_client() as http:
        for (base_url, api_key), group in by_server.items():
            try:
                listed = {
                    s.get("name"): s.get("status") for s in waha.sessions(http, base_url, api_key)
                }
            except waha.WahaError as exc:
                problems.extend(f"{s.name}: {exc.code}" for s in group)
                continue
            for session in group:
                status = listed.get(session.name, "MISSING")
                if status != "WORKING":
                    problems.append(f"{session.name}: {status}")
    if problems:
        raise SessionNotWorking("; ".join(problems))
