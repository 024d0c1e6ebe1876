"""Operator actions on WAHA sessions (the admin calls these; nothing else writes sessions)."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from whatsapp import client as waha
from whatsapp.models import WahaSession

TEST_TEXT = "Deskcomm: mensagem de teste da sessão {name} ({when} UTC)."


def test_send(session: WahaSession) -> str:
    """Send a test text to the session's own number (WAHA's `me`); returns WAHA's message id.

    Raises `WahaError` when WAHA does not list the session as WORKING or refuses the send.
    """
    with waha.waha_client() as http:
        listed = waha.sessions(http, session.effective_base_url, session.api_key)
        mine = next((s for s in listed if s.get("name") == session.name), None)
        if mine is None or mine.get("status") != "WORKING":
            status = mine.get("status") if mine else "MISSING"
            raise waha.WahaError(
                f"session {session.name} is {status}, not WORKING", code="not_working",
                retryable=False,
            )  # fmt: skip
        me = mine.get("me")
        chat_id = str(me.get("id") or "") if isinstance(me, dict) else ""
        if not chat_id:
            raise waha.WahaError("WAHA gave no own number (me.id)", code="no_me", retryable=False)
        when = timezone.now().astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M")
        target = waha.Target(session.effective_base_url, session.name, session.api_key)
        sent = waha.send_text(http, target, chat_id, TEST_TEXT.format(name=session.name, when=when))
    return sent.id
