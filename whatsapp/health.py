"""The `waha` health check (not required): every configured session's WAHA answers and lists it
as WORKING. One check for all sessions; its error names each session that is not well."""

from __future__ import annotations

from whatsapp import client as waha
from whatsapp.models import WahaSession


def configured() -> bool:
    try:
        return WahaSession.objects.exists()
    except Exception:  # no table yet (before migrate): nothing to check
        return False


def check_sessions() -> None:
    problems: list[str] = []
    by_server: dict[tuple[str, str], list[WahaSession]] = {}
    for session in WahaSession.objects.all():
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
        raise RuntimeError("; ".join(problems))
