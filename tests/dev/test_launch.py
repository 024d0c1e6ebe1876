"""What `run` refuses before starting anything: a second run on the checkout, a busy web port."""

from __future__ import annotations

import signal
import socket

from tests.dev.harness import Launcher, is_running


def test_a_second_run_on_the_same_checkout_is_refused_naming_the_first(
    launcher: Launcher,
) -> None:
    first = launcher.start(launcher.program("worker"))
    [worker] = first.wait_for_pids("worker", 1)

    second = launcher.start(
        launcher.program("intruder"), setup_steps=[launcher.marker_step("migrated")]
    )

    assert second.wait() == 1
    assert f"already running in this checkout (pid {first.proc.pid}" in second.output()
    assert not (launcher.directory / "migrated").exists()
    assert second.pids("intruder") == []
    assert first.proc.poll() is None
    assert first.pids("worker") == [worker]
    assert is_running(worker)
    assert first.stop(signal.SIGTERM) == 0


def test_a_busy_web_port_is_refused_before_setup_or_any_program_starts(
    launcher: Launcher,
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        run = launcher.start(
            launcher.program("worker"),
            setup_steps=[launcher.marker_step("migrated")],
            web_port=port,
        )
        assert run.wait() == 1

    assert f"port {port} on 127.0.0.1 is already in use" in run.output()
    assert not (launcher.directory / "migrated").exists()
    assert run.pids("worker") == []


def test_setup_steps_run_first_and_a_failing_one_starts_nothing(launcher: Launcher) -> None:
    run = launcher.start(
        launcher.program("worker"),
        setup_steps=[launcher.marker_step("migrated"), ["false"]],
    )

    assert run.wait() == 1
    assert (launcher.directory / "migrated").exists()
    assert "false failed with exit code 1" in run.output()
    assert run.pids("worker") == []
