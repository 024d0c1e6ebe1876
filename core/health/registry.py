"""Health checks: a small registry of named checks, run in parallel, each with its own timeout.

`GET /api/v1/health` and `manage.py healthcheck` run every enabled check and answer
`{status, checks{...}, duration_ms, version, commit}`; the status is "ok" only when every
required check passed. Each check runs on its own daemon thread and is abandoned (reported
"timeout") when its timeout passes, so a hanging dependency cannot hold the answer past the
overall budget. Apps register their own checks in `AppConfig.ready` (`register(...)`); the same
name registered again replaces the earlier check (the jobs app replaces "broker" with its
broker's own check). A family of checks known only at run time (one per configured WAHA
session) is registered with `register_family(name, provider)`: the provider lists the checks at
each run; if it fails, the answer shows one failing check under the family's name.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from core.logs.formatters import commit

logger = logging.getLogger(__name__)

VERSION = "0.1.0"


@dataclass(frozen=True)
class Check:
    """One dependency probe: `probe()` raises when the dependency is unhealthy."""

    name: str
    probe: Callable[[], None]
    required: bool = True
    timeout: float | None = None  # None: settings.HEALTH["CHECK_TIMEOUT"]
    enabled: Callable[[], bool] = lambda: True  # read at run time (e.g. "is a broker set?")


_registry: dict[str, Check] = {}
_families: dict[str, Callable[[], list[Check]]] = {}


def register(
    name: str,
    probe: Callable[[], None],
    *,
    required: bool = True,
    timeout: float | None = None,
    enabled: Callable[[], bool] = lambda: True,
) -> None:
    """Add (or replace) a named check."""
    _registry[name] = Check(name, probe, required, timeout, enabled)


def register_family(name: str, provider: Callable[[], list[Check]]) -> None:
    """Add (or replace) a provider of checks listed at run time (their names should start
    with `name:`)."""
    _families[name] = provider


def _raise(exc: Exception) -> Callable[[], None]:
    def probe() -> None:
        raise exc

    return probe


def registered() -> list[Check]:
    """The static checks, then each family's checks of this run."""
    checks = list(_registry.values())
    for name, provider in _families.items():
        try:
            checks.extend(provider())
        except Exception as exc:  # the family could not be listed: say so, as a failed check
            logger.warning("health check family %s could not be listed: %s", name, exc)
            checks.append(Check(name, _raise(exc), required=False))
    return checks


@dataclass
class _Result:
    status: str = "timeout"
    duration_ms: int | None = None
    error: str | None = None
    done: threading.Event = field(default_factory=threading.Event)


def run_checks() -> dict[str, Any]:
    """Run every enabled check in parallel and build the health document."""
    started = time.monotonic()
    checks = [c for c in registered() if c.enabled()]
    results = {c.name: _start(c) for c in checks}
    budget = float(settings.HEALTH["BUDGET_SECONDS"])
    for check in checks:
        # All checks started together, so each one's deadline counts from `started`.
        timeout = check.timeout or float(settings.HEALTH["CHECK_TIMEOUT"])
        deadline = started + min(timeout, budget)
        results[check.name].done.wait(max(0.0, deadline - time.monotonic()))
    report = {c.name: _describe(c, results[c.name]) for c in checks}
    healthy = all(report[c.name]["status"] == "ok" for c in checks if c.required)
    return {
        "status": "ok" if healthy else "fail",
        "checks": report,
        "duration_ms": int((time.monotonic() - started) * 1000),
        "version": VERSION,
        "commit": commit(),
    }


def _start(check: Check) -> _Result:
    result = _Result()
    thread = threading.Thread(
        target=_run_one, args=(check, result), name=f"health-{check.name}", daemon=True
    )
    thread.start()
    return result


def _run_one(check: Check, result: _Result) -> None:
    from django.db import connections

    started = time.monotonic()
    try:
        check.probe()
        result.status = "ok"
    except Exception as exc:
        # The public answer names the error class only; the details go to the log.
        logger.warning("health check %s failed: %s", check.name, exc)
        result.status, result.error = "fail", type(exc).__name__
    finally:
        result.duration_ms = int((time.monotonic() - started) * 1000)
        connections.close_all()  # this thread's own connections
        result.done.set()


def _describe(check: Check, result: _Result) -> dict[str, Any]:
    if not result.done.is_set():
        logger.warning("health check %s timed out", check.name)
        return {"status": "timeout", "required": check.required}
    described: dict[str, Any] = {
        "status": result.status,
        "required": check.required,
        "duration_ms": result.duration_ms,
    }
    if result.error:
        described["error"] = result.error
    return described
