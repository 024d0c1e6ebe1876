"""What lets the suite run in parallel worker processes (pytest-xdist, `python3 -m dev test`).

- **The run's directory**: the controller makes one temporary directory per run and hands it to
  its workers through the environment; the template database's lock (tests/support/
  template_db.py) and the server lock below live there. The controller drops the template and
  removes the directory when the run ends.
- **Alone on the server** (`@pytest.mark.exclusive`): a test that restarts the shared PostgreSQL
  server (or otherwise disturbs every database on it) runs while no other worker runs a test.
  Every test holds a shared lock on the run's server lock while it runs; an exclusive test
  holds it exclusively, and a gate lock ahead of it keeps new tests from starting meanwhile (so
  it cannot be starved). After an exclusive test, every worker closes its database connections
  before its next test: the restart cut them.
- **Ids**: every test has its own node id (the scheduler keys its work by id).
- **Groups** (`--dist loadgroup`): the tests that share a session-scoped server too expensive to
  build once per worker (the streaming replica pair) all go to one worker.
- **The count**: the number of collected tests is repeated in the summary, so a run that lost
  tests shows it next to the result.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

RUN_DIR_ENV = "DESKCOMM_TEST_RUN_DIR"
ALONE_ENV = "DESKCOMM_TEST_ALONE"  # set while this worker runs an exclusive test
# Session-scoped fixtures whose tests share one worker: fixture name -> xdist group.
SHARED_SERVERS = {"streaming_pair": "replica"}
EXCLUSIVE = "exclusive"


def worker_id(config: pytest.Config) -> str | None:
    """`gw0`, `gw1`... in an xdist worker; None in a serial run (and in the controller)."""
    workerinput = getattr(config, "workerinput", None)
    return None if workerinput is None else str(workerinput["workerid"])


def controller(config: pytest.Config) -> bool:
    """Whether this process hands out the tests to xdist workers."""
    return worker_id(config) is None and getattr(config.option, "dist", "no") != "no"


def alone_on_the_server() -> bool:
    """Whether no other test runs now: always in a serial run, in an exclusive test under xdist."""
    return "PYTEST_XDIST_WORKER" not in os.environ or ALONE_ENV in os.environ


def run_directory() -> Path:
    return Path(os.environ[RUN_DIR_ENV])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{EXCLUSIVE}: runs while no other xdist worker runs a test (it restarts the database "
        "server, which cuts every worker's connections)",
    )
    if controller(config):
        # Inherited by the workers, which are started after this (xdist's sessionstart).
        os.environ[RUN_DIR_ENV] = tempfile.mkdtemp(prefix="deskcomm-tests-")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unique_ids(items)
    for item in items:
        for fixture, group in SHARED_SERVERS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(group))
    if (
        getattr(config.option, "loadgroup", False)
        or getattr(config.option, "dist", "") == "loadgroup"
    ):
        group_ids(items)


def unique_ids(items: list[pytest.Item]) -> None:
    """Items that share a node id get their own name in it. schemathesis gives every operation
    of `schema.parametrize()` the test function's id; xdist keys its work by id, so its group
    scheduler ran one of them and silently dropped the others."""
    counts = Counter(item.nodeid for item in items)
    for item in items:
        if counts[item.nodeid] > 1 and item.parent is not None:
            _rename(item, f"{item.parent.nodeid}::{item.name}")
    still = [nodeid for nodeid, n in Counter(item.nodeid for item in items).items() if n > 1]
    if still:
        raise pytest.UsageError(f"tests that share a node id cannot be told apart: {still}")


def group_ids(items: list[pytest.Item]) -> None:
    """`--dist loadgroup` sends the tests whose id ends in `@group` to one worker. xdist 3.8
    appends it by setting `item._nodeid`, which pytest 9 no longer reads (the id is `item._id`):
    done here, so the groups hold."""
    for item in items:
        names = {
            str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
            for mark in item.iter_markers("xdist_group")
        }
        if names and not item.nodeid.endswith("@" + "_".join(sorted(names))):
            _rename(item, f"{item.nodeid}@{'_'.join(sorted(names))}")


def _rename(item: pytest.Item, nodeid: str) -> None:
    if hasattr(item, "_id"):  # pytest 9: a structured id, kept with its string form
        from _pytest.nodeid import NodeId

        item._id = NodeId.parse(nodeid)
    else:
        item._nodeid = nodeid


_collected: dict[str, int] = {}


def pytest_collection_finish(session: pytest.Session) -> None:
    _collected["tests"] = len(session.items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    _collected["tests"] = len(ids)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if worker_id(config) is None and "tests" in _collected:
        workers = len(getattr(config.option, "tx", None) or []) or 1
        terminalreporter.write_line(
            f"collected {_collected['tests']} tests, run by {workers} worker process(es)"
        )


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not controller(session.config) or RUN_DIR_ENV not in os.environ:
        return
    from django.conf import settings

    from tests.support.template_db import drop_template

    directory = run_directory()
    try:
        drop_template(directory, settings.DATABASES["default"])
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class ServerLock:
    """A worker's side of the server lock (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.gate = (directory / "server.gate").open("a")
        self.lock = (directory / "server.lock").open("a")
        self.generation_file = directory / "server.generation"
        self.seen = self.generation()

    def generation(self) -> int:
        try:
            return int(self.generation_file.read_text() or 0)
        except FileNotFoundError:
            return 0

    @contextlib.contextmanager
    def held(self, *, exclusive: bool) -> Iterator[None]:
        fcntl.flock(self.gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            if not exclusive:
                fcntl.flock(self.gate, fcntl.LOCK_UN)
        try:
            self._reconnect_after_restart()
            if exclusive:
                os.environ[ALONE_ENV] = "1"
            yield
        finally:
            os.environ.pop(ALONE_ENV, None)
            if exclusive:
                self.seen = self.generation() + 1
                self.generation_file.write_text(str(self.seen))
            fcntl.flock(self.lock, fcntl.LOCK_UN)
            if exclusive:
                fcntl.flock(self.gate, fcntl.LOCK_UN)

    def _reconnect_after_restart(self) -> None:
        current = self.generation()
        if current == self.seen:
            return
        self.seen = current
        import dramatiq
        from django.db import connections

        from tests.support.pgserver import reset_pools

        connections.close_all()
        reset_pools(dramatiq.get_broker())


_lock: list[ServerLock] = []


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    if worker_id(item.config) is None:
        yield
        return
    if not _lock:
        _lock.append(ServerLock(run_directory()))
    with _lock[0].held(exclusive=item.get_closest_marker(EXCLUSIVE) is not None):
        yield
