"""`python -m deskcomm.probe URL`: the web container's healthcheck (stdlib only, no curl).

Sends the first ALLOWED_HOSTS entry as Host (production refuses unknown hosts) and exits 0 only
on a 200 answer.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request


def probe(url: str, timeout: float = 4.0) -> int:
    """0 when `url` answers 200, else 1."""
    hosts = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "").split(",") if h.strip()]
    host = next((h for h in hosts if "*" not in h and not h.startswith(".")), None)
    request = urllib.request.Request(url, headers={"Host": host} if host else {})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return 0 if response.status == 200 else 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"health probe failed: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(probe(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/api/v1/health"))
