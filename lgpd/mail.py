"""The export link goes to the data subject, by e-mail, and nowhere else (never on the bus)."""

from __future__ import annotations

import datetime as dt

from django.core.mail import send_mail

SUBJECT = "Your personal data export is ready"
BODY = """Hello,

the copy of your personal data you asked for is ready. Download it here:

{url}

The link works once and until {expires:%Y-%m-%d %H:%M} UTC. If it does not work any more, ask us
for a new one.
"""


def send_export_link(*, to: str, url: str, expires_at: dt.datetime) -> None:
    """E-mail the single-use link through Django's mail backend; raises when it cannot be sent."""
    send_mail(SUBJECT, BODY.format(url=url, expires=expires_at), None, [to], fail_silently=False)
