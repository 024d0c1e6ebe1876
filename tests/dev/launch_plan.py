"""Runs dev.launch.launch() on a plan read from a JSON file, as `python3 -m dev run` would.

usage: launch_plan.py PLAN.json   (see tests/dev/harness.py, which writes it)
The environment is this process's own: no virtualenv or database is prepared.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path

from dev.console import DevError, say
from dev.launch import Launch, launch
from dev.supervisor import Backoff, Program


def plan_from(path: Path) -> Launch:
    raw = json.loads(path.read_text())
    programs = {
        name: Program(spec["argv"], name, signal.Signals[spec["stop_signal"]])
        for name, spec in raw["programs"].items()
    }
    return Launch(
        lock_path=Path(raw["lock_path"]),
        web_host="127.0.0.1",
        web_port=raw["web_port"],
        setup_steps=raw["setup_steps"],
        programs=programs,
        cwd=Path(raw["cwd"]),
        grace_seconds=raw["grace_seconds"],
        backoff=Backoff(first=raw["backoff_first"]),
    )


def main() -> int:
    try:
        return launch(
            plan_from(Path(sys.argv[1])), lambda: contextlib.nullcontext(dict(os.environ))
        )
    except DevError as exc:
        say(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
