"""The `run` supervisor with real processes and real signals (fake programs, no Django)."""

from __future__ import annotations

import os
import signal

import pytest

from dev.supervisor import Backoff
from tests.dev.harness import Launcher, is_running, wait_until


def test_backoff_doubles_up_to_the_cap_and_starts_over_after_a_long_run() -> None:
    backoff = Backoff(first=1.0, cap=30.0, reset_after=60.0)
    delays = [backoff.next_delay(None, uptime=0.5)]
    for _ in range(6):
        delays.append(backoff.next_delay(delays[-1], uptime=0.5))
    assert delays == [1, 2, 4, 8, 16, 30, 30]
    assert backoff.next_delay(30.0, uptime=60.0) == 1.0


def test_a_program_killed_from_outside_is_restarted_and_the_others_keep_running(
    launcher: Launcher,
) -> None:
    run = launcher.start({**launcher.program("worker"), **launcher.program("webhooks")})
    [worker] = run.wait_for_pids("worker", 1)
    [webhooks] = run.wait_for_pids("webhooks", 1)

    os.kill(worker, signal.SIGKILL)
    run.wait_for_output("worker was killed by SIGKILL; restarting in 0.2 s")
    restarted = run.wait_for_pids("worker", 2)[-1]
    os.kill(restarted, signal.SIGTERM)
    run.wait_for_output("worker exited with code 0; restarting in 0.4 s")  # doubled
    third = run.wait_for_pids("worker", 3)[-1]

    assert len({worker, restarted, third}) == 3
    assert is_running(third)
    assert run.pids("webhooks") == [webhooks]
    assert is_running(webhooks)
    assert run.signals("webhooks") == []
    assert run.proc.poll() is None
    assert run.stop(signal.SIGTERM) == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_reaches_each_program_exactly_once(
    launcher: Launcher, signum: signal.Signals
) -> None:
    programs = {
        **launcher.program("web", stop_signal="SIGINT"),
        **launcher.program("worker"),
        # Like rundramatiq: a main process that forwards the signal to its worker process.
        **launcher.program("jobs", "--forward-to-child"),
    }
    run = launcher.start(programs)
    started = [run.wait_for_pids(name, 1)[0] for name in ("web", "worker", "jobs", "jobs-child")]

    assert run.stop(signum) == 0

    assert run.signals("web") == ["SIGINT"]
    assert run.signals("worker") == ["SIGTERM"]
    assert run.signals("jobs") == ["SIGTERM"]
    assert run.signals("jobs-child") == ["SIGTERM"]  # from jobs only, not from the supervisor
    assert not any(is_running(pid) for pid in started)
    assert f"{signum.name} received: stopping all processes" in run.output()
    assert "worker stopped (exited with code 0)" in run.output()
    assert "restarting" not in run.output()


def test_a_program_that_ignores_its_stop_signal_is_killed_after_the_grace_period(
    launcher: Launcher,
) -> None:
    programs = {**launcher.program("stubborn", "--ignore-stop"), **launcher.program("polite")}
    # 5 s: ample for the programs to record the signal, however loaded the machine is.
    run = launcher.start(programs, grace_seconds=5.0)
    [stubborn] = run.wait_for_pids("stubborn", 1)
    run.wait_for_pids("polite", 1)

    assert run.stop(signal.SIGTERM) == 1

    output = run.output()
    assert "waiting up to 5 s for stubborn, polite to exit" in output
    assert "still running after 5 s: stubborn" in output
    assert f"sending SIGKILL to stubborn (pid {stubborn})" in output
    assert run.signals("stubborn") == ["SIGTERM"]
    assert run.signals("polite") == ["SIGTERM"]
    assert not is_running(stubborn)


def test_a_second_signal_kills_what_is_left_at_once(launcher: Launcher) -> None:
    run = launcher.start(launcher.program("stubborn", "--ignore-stop"), grace_seconds=600.0)
    [stubborn] = run.wait_for_pids("stubborn", 1)
    os.killpg(run.proc.pid, signal.SIGINT)
    run.wait_for_output("waiting up to 600 s for stubborn to exit (Ctrl-C again to kill them now)")
    # The program has recorded its stop signal (and ignored it) before the second Ctrl-C.
    wait_until(lambda: run.signals("stubborn") == ["SIGTERM"], run.story)

    assert run.stop(signal.SIGINT) == 1  # well within the 600 s grace period

    assert "SIGINT again: killing what is left" in run.output()
    assert run.signals("stubborn") == ["SIGTERM"]
    assert not is_running(stubborn)
