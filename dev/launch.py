"""What `run` does, in order: run lock, web port check, environment, setup steps, supervision."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from dev.console import DevError, say
from dev.foreground import run_foreground
from dev.ports import port_is_free
from dev.runlock import hold_run_lock
from dev.supervisor import DEFAULT_GRACE_SECONDS, Backoff, Program, Supervisor

#: Prepares what the setup steps and programs need (venv, database) and yields their environment.
Environment = Callable[[], AbstractContextManager[dict[str, str]]]


@dataclass(frozen=True)
class Launch:
    """Everything `run` needs to know, injectable so tests can launch small scripts."""

    lock_path: Path
    web_host: str
    web_port: int
    setup_steps: Sequence[list[str]]
    programs: Mapping[str, Program]
    cwd: Path
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    backoff: Backoff = field(default_factory=Backoff)


def launch(plan: Launch, environment: Environment) -> int:
    """Refuse early (second run, busy port), then set up and supervise until stopped."""
    with hold_run_lock(plan.lock_path):
        require_free_port(plan.web_host, plan.web_port)
        with environment() as env:
            code = run_setup_steps(plan.setup_steps, env, plan.cwd)
            if code != 0:
                return code
            return supervisor_for(plan, env).run()


def require_free_port(host: str, port: int) -> None:
    """Refuse to start anything when the web port is taken."""
    if not port_is_free(host, port):
        raise DevError(
            f"port {port} on {host} is already in use (another `run`, or another program); "
            f"stop that or choose another port, e.g. PORT={port + 1} python3 -m dev run"
        )


def run_setup_steps(steps: Sequence[list[str]], env: dict[str, str], cwd: Path) -> int:
    """Run each step in the foreground; the first failure's exit code, or 0."""
    for argv in steps:
        shown = shlex.join([Path(argv[0]).name, *argv[1:]])
        say(f"{shown} ...")
        code = run_foreground(argv, env, cwd)
        if code != 0:
            say(f"{shown} failed with exit code {code}")
            return code
    return 0


def supervisor_for(plan: Launch, env: dict[str, str]) -> Supervisor:
    """The supervisor of plan's programs."""
    return Supervisor(
        plan.programs,
        env=env,
        cwd=plan.cwd,
        grace_seconds=plan.grace_seconds,
        backoff=plan.backoff,
    )
