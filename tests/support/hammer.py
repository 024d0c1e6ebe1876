"""Two real processes counting requests against one rate limit at the same moment."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.support.processes import REPO, subprocess_env

# argv: the client (a rate-limit key or an API key), requests per process. `allowed(client,
# rate, now) -> bool` comes from the caller's code, run after django.setup().
HAMMER = textwrap.dedent(
    """
    import sys, django
    django.setup()
    from django.utils import timezone
    from core import rate_limits
    exec(sys.argv[3])
    client, hits = sys.argv[1], int(sys.argv[2])
    rate = rate_limits.parse_rate("50/hour")
    print("ready", flush=True)
    sys.stdin.readline()
    print(sum(allowed(client, rate, timezone.now()) for _ in range(hits)), flush=True)
    """
)


def hammer(code: str, client: str, *, processes: int = 2, hits: int = 40) -> list[int]:
    """How many of each process's `hits` requests `allowed` let through, all started together
    (a rate of 50/hour)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", HAMMER, client, str(hits), code],
            env=subprocess_env(),
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        return [int(proc.communicate(timeout=60)[0].strip()) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
