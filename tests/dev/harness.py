"""Launches dev.launch plans of fake programs (tests/dev/fake_program.py) as real processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
FAKE_PROGRAM = HERE / "fake_program.py"
LAUNCH_PLAN = HERE / "launch_plan.py"
TIMEOUT = 20.0


def wait_until(condition: Callable[[], bool], what: Callable[[], str]) -> None:
    """Poll condition until it holds; fail after TIMEOUT seconds with what() as the story."""
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {TIMEOUT:g} s; {what()}")
        time.sleep(0.02)


def is_running(pid: int) -> bool:
    """Whether pid is a live (not zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


@dataclass
class Run:
    """One launch_plan.py process (the supervisor) and the files its programs write."""

    proc: subprocess.Popen[bytes]
    log: Path
    directory: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def story(self) -> str:
        return f"supervisor output:\n{self.output()}"

    def wait_for_output(self, text: str) -> None:
        wait_until(lambda: text in self.output(), lambda: f"no {text!r} in the {self.story()}")

    def pids(self, name: str) -> list[int]:
        return [int(pid) for pid in lines(self.directory / f"{name}.pids")]

    def signals(self, name: str) -> list[str]:
        return lines(self.directory / f"{name}.signals")

    def wait_for_pids(self, name: str, count: int) -> list[int]:
        wait_until(
            lambda: len(self.pids(name)) >= count,
            lambda: f"{name} has pids {self.pids(name)}, wanted {count}; {self.story()}",
        )
        return self.pids(name)

    def stop(self, signum: int) -> int:
        """Signal the supervisor's process group, as a terminal's Ctrl-C would; its exit code."""
        os.killpg(self.proc.pid, signum)
        return self.wait()

    def wait(self) -> int:
        try:
            return self.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the supervisor did not exit; {self.story()}") from None

    def recorded_pids(self) -> list[int]:
        return [int(pid) for path in self.directory.glob("*.pids") for pid in lines(path)]

    def kill_leftovers(self) -> None:
        """SIGKILL the supervisor and any fake program still alive (test teardown)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for pid in self.recorded_pids():
            if is_running(pid) and str(FAKE_PROGRAM) in Path(f"/proc/{pid}/cmdline").read_text():
                os.kill(pid, signal.SIGKILL)


@dataclass
class Launcher:
    """Writes plans into a temporary directory and starts supervisors on them."""

    directory: Path
    runs: list[Run] = field(default_factory=list)

    def program(self, name: str, *flags: str, stop_signal: str = "SIGTERM") -> dict[str, Any]:
        argv = [sys.executable, str(FAKE_PROGRAM), name, str(self.directory), *flags]
        return {name: {"argv": argv, "stop_signal": stop_signal}}

    def marker_step(self, marker: str) -> list[str]:
        """A setup step that leaves a marker file behind."""
        return [sys.executable, "-c", f"open({str(self.directory / marker)!r}, 'w').close()"]

    def start(
        self,
        programs: dict[str, Any],
        *,
        setup_steps: list[list[str]] | None = None,
        web_port: int | None = None,
        grace_seconds: float = 5.0,
    ) -> Run:
        number = len(self.runs) + 1
        plan = {
            "lock_path": str(self.directory / "run.lock"),
            "web_port": web_port or free_port(),
            "setup_steps": setup_steps or [],
            "programs": programs,
            "cwd": str(self.directory),
            "grace_seconds": grace_seconds,
            "backoff_first": 0.2,
        }
        plan_file = self.directory / f"plan{number}.json"
        plan_file.write_text(json.dumps(plan))
        run = self.spawn(plan_file, self.directory / f"supervisor{number}.log")
        self.runs.append(run)
        return run

    def spawn(self, plan_file: Path, log: Path) -> Run:
        with log.open("wb") as output:
            proc = subprocess.Popen(
                [sys.executable, str(LAUNCH_PLAN), str(plan_file)],
                cwd=REPO,
                env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"},
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                # Its own process group, like a shell job: Run.stop signals it as a terminal would.
                start_new_session=True,
            )
        return Run(proc, log, self.directory)

    def close(self) -> None:
        for run in self.runs:
            run.kill_leftovers()
