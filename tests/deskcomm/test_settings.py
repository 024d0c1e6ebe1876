"""Every environment setting the code reads is documented in `.env.example`."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENV_READ = re.compile(r"""env(?:\.\w+)?\(\s*["']([A-Z][A-Z0-9_]+)["']""")


def documented() -> set[str]:
    lines = (REPO / ".env.example").read_text().splitlines()
    return {line.split("=", 1)[0] for line in lines if re.match(r"^[A-Z][A-Z0-9_]*=", line)}


def test_every_setting_is_in_env_example() -> None:
    read = set(ENV_READ.findall((REPO / "deskcomm" / "settings.py").read_text()))
    assert read, "the pattern no longer finds env reads in settings.py"
    assert read - documented() == set()
