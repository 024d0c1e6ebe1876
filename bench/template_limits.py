"""Template limits under attack: how fast gunicorn refuses each denial-of-service template, what
it does to `/api/ping` meanwhile, and what it leaves in the web process's memory.

Run from the repository root with the project's interpreter:

    .venv/bin/python bench/template_limits.py [--attacks 100] [--pings 300]

What happens (loopback only, bounded in requests):

1. A scratch database `<DATABASE_URL name>_tplbench` is dropped, created and migrated; an
   organization and an API key with every scope are created (bench/api_load.py's helpers).
2. gunicorn starts with one worker (`WEB_CONCURRENCY=1`, the project's threads) so "the web
   process" is one process whose RSS can be read from /proc.
3. `--pings` sequential `GET /api/ping` alone: their p99 is the baseline.
4. `--attacks` `POST /api/v1/pipelines` whose http-request url holds one of the shapes below, in
   turn, from one client, while a second client sends the same pings: per shape the median time
   to the answer (each must be a 400), the pings' p99 during the attacks and its ratio to the
   baseline, and the worker's RSS before and after.

The last line is `template_refusal_max_ms=<x> ping_p99_ratio=<y> rss_growth_mb=<z>`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from bench.api_load import create_key, free_port, start_gunicorn, stop  # noqa: E402
from bench.scratch import ScratchDatabase, production_settings  # noqa: E402
from tests.support.pipelines import DOS_TEMPLATES as SHAPES  # noqa: E402


def say(message: str) -> None:
    print(f"[template_limits] {message}", file=sys.stderr, flush=True)


def pings(port: int, count: int, out: list[float], stop_when: threading.Event | None) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for _ in range(count):
        if stop_when is not None and stop_when.is_set():
            break
        started = time.perf_counter()
        connection.request("GET", "/api/ping")
        response = connection.getresponse()
        response.read()
        assert response.status == 200, response.status
        out.append(time.perf_counter() - started)
    connection.close()


def attack(port: int, token: str, source: str) -> float:
    definition = {
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "notify", "type": "http-request", "config": {"url": f"https://x.test/{source}"}},
        ],
        "edges": [{"from": "start", "to": "notify"}],
    }
    body = json.dumps({"name": "dos", "trigger": "order.post", "definition": definition})
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    started = time.perf_counter()
    connection.request("POST", "/api/v1/pipelines", body=body, headers=headers)
    response = connection.getresponse()
    response.read()
    elapsed = time.perf_counter() - started
    connection.close()
    assert response.status == 400, response.status
    return elapsed


def worker_rss_kb(server_pid: int) -> int:
    children = Path(f"/proc/{server_pid}/task/{server_pid}/children").read_text().split()
    total = 0
    for pid in children:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] * 1000


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attacks", type=int, default=100)
    parser.add_argument("--pings", type=int, default=300)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    scratch = ScratchDatabase.beside("tplbench")
    env = scratch.env(
        WEB_CONCURRENCY="1",
        LOG_LEVEL="WARNING",
        GUNICORN_LOG_LEVEL="warning",
        ALLOWED_HOSTS="localhost,127.0.0.1",
        API_THROTTLE_RATE="1000000000/minute",
        **production_settings(),
    )
    say(f"re-creating and migrating scratch database {scratch.name}")
    scratch.recreate(env)
    token = create_key(env)
    port = free_port()
    server = start_gunicorn(env, port)
    try:
        for source in SHAPES.values():  # warm-up: imports, first compile
            attack(port, token, source)
        alone: list[float] = []
        pings(port, args.pings, alone, None)
        rss_before = worker_rss_kb(server.pid)
        times: dict[str, list[float]] = {name: [] for name in SHAPES}
        during: list[float] = []
        done = threading.Event()
        pinger = threading.Thread(target=pings, args=(port, 10**6, during, done))
        pinger.start()
        names = list(SHAPES)
        for n in range(args.attacks):
            name = names[n % len(names)]
            times[name].append(attack(port, token, SHAPES[name]))
        done.set()
        pinger.join()
        rss_after = worker_rss_kb(server.pid)
    finally:
        stop(server)
    print(f"{'shape':<16} {'attacks':>7} {'median ms':>9} {'max ms':>7}")
    for name, values in times.items():
        print(
            f"{name:<16} {len(values):>7} {statistics.median(values) * 1000:>9.1f} "
            f"{max(values) * 1000:>7.1f}"
        )
    ratio = p99(during) / p99(alone)
    growth = (rss_after - rss_before) / 1024
    print(f"/api/ping p99 alone {p99(alone):.1f} ms ({len(alone)}), during the attacks "
          f"{p99(during):.1f} ms ({len(during)}): ratio {ratio:.2f}")  # fmt: skip
    print(f"web worker RSS {rss_before / 1024:.1f} MB -> {rss_after / 1024:.1f} MB")
    worst = max(max(v) for v in times.values()) * 1000
    print(
        f"template_refusal_max_ms={worst:.0f} ping_p99_ratio={ratio:.2f} rss_growth_mb={growth:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
