"""Point one of Django's storage aliases at a local folder for a test (pytest-django's
`settings` fixture undoes it afterwards)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def use_local_storage(settings: Any, alias: str, location: Path) -> Path:
    """`STORAGES[alias]` becomes a FileSystemStorage in `location`; returns `location`."""
    settings.STORAGES = {
        **settings.STORAGES,
        alias: {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(location)},
        },
    }
    return location
