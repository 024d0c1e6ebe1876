"""WSGI entry point (gunicorn deskcomm.wsgi)."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deskcomm.settings")

application = get_wsgi_application()

# Production (DEBUG off) refuses to serve with unsafe settings (core.checks).
from core.checks import refuse_unsafe_start  # noqa: E402  (needs the app registry)

refuse_unsafe_start()
