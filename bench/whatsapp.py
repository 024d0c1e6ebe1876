"""WhatsApp benchmark: inbound WAHA webhooks through gunicorn, and sends from `message.queued`
to a fake WAHA server, each with a baseline measured in the same run.

Run from the repository root with the project's interpreter:

    .venv/bin/python bench/whatsapp.py [--webhooks N] [--sends N] [--concurrency C] [--quick]

1. A scratch database `<DATABASE_URL name>_wabench` is dropped, created and migrated (the base
   database is never touched), with an organization and a WAHA session whose HMAC secret is
   known. gunicorn starts with the project's `gunicorn.conf.py` on a free loopback port.
2. Inbound: `--concurrency` client threads (keep-alive connections) POST N signed `message`
   webhooks (HMAC-SHA512, a new chat per 10 messages) to `/api/webhooks/waha/bench`; each
   writes a Message (and a contact and conversation for a new chat) and `message.received`.
   Floor: as many `GET /api/ping` requests with the same clients (no database).
   Ratio = webhooks/s / ping/s.
3. Sends: N messages are queued with `crm.services.send_message` (untimed), then one
   `manage.py drain_events --once --consumer whatsapp-send-worker --concurrency C` process
   sends them to the fake WAHA server of tests/support/waha.py (loopback). The process's
   start-up (an empty `--once` run, measured separately) is subtracted from its wall time.
   Baseline: N raw httpx `POST /api/sendText` to the same server from C threads.
   Ratio = sends/s / raw POSTs/s.

Every check must hold (every webhook stored, every message sent exactly once); the machine is
shared, so figures are indicative. The last line is `name=value` pairs.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import http.client
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.api_load import free_port, start_gunicorn, stop
from bench.scratch import REPO_ROOT, ScratchDatabase, production_settings

SECRET = "bench-hmac-secret"  # pragma: allowlist secret
SESSION = "bench"


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def webhook(n: int) -> bytes:
    chat = f"55119{n // 10:08d}@c.us"
    return json.dumps(
        {
            "event": "message",
            "session": SESSION,
            "engine": "NOWEB",
            "payload": {
                "id": f"false_{chat}_{uuid.uuid4().hex.upper()}",
                "timestamp": int(time.time()),
                "from": chat,
                "fromMe": False,
                "body": f"mensagem {n}",
                "hasMedia": False,
                "_data": {"notifyName": f"Cliente {n // 10}"},
            },
        }
    ).encode()


def drive(
    port: int, jobs: list[Callable[[http.client.HTTPConnection], int]], concurrency: int
) -> tuple[float, dict[int, int]]:
    """Run the request callables on `concurrency` threads; (requests/s, status counts)."""
    lock = threading.Lock()
    statuses: dict[int, int] = {}
    chunks = [jobs[i::concurrency] for i in range(concurrency)]

    def worker(chunk: list[Callable[[http.client.HTTPConnection], int]]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for job in chunk:
            status = job(conn)
            with lock:
                statuses[status] = statuses.get(status, 0) + 1
        conn.close()

    threads = [threading.Thread(target=worker, args=(c,)) for c in chunks if c]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(jobs) / (time.perf_counter() - started), statuses


def post_webhook(body: bytes) -> Callable[[http.client.HTTPConnection], int]:
    digest = hmac.new(SECRET.encode(), body, hashlib.sha512).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "X-Webhook-Hmac": digest,
        "X-Webhook-Hmac-Algorithm": "sha512",
    }

    def job(conn: http.client.HTTPConnection) -> int:
        conn.request("POST", f"/api/webhooks/waha/{SESSION}", body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status

    return job


def ping(conn: http.client.HTTPConnection) -> int:
    conn.request("GET", "/api/ping")
    response = conn.getresponse()
    response.read()
    return response.status


def setup_django(scratch: ScratchDatabase, waha_url: str) -> None:
    os.environ.update(
        DATABASE_URL=scratch.url,
        DJANGO_SETTINGS_MODULE="deskcomm.settings",
        DB_RLS_BYPASS="true",
        WAHA_ALLOW_PRIVATE_TARGETS="true",
        LOG_LEVEL="WARNING",
    )
    import django

    django.setup()
    from core.models import Organization
    from whatsapp.models import WahaSession

    org = Organization.objects.create(name="Bench", slug="bench")
    session = WahaSession(organization=org, name=SESSION, base_url=waha_url, status="WORKING")
    session.webhook_secret = SECRET
    session.save()


def queue_sends(n: int) -> None:
    from crm.models import Contact, Conversation
    from crm.services import send_message
    from whatsapp.models import WahaSession

    org_id = WahaSession.objects.get(name=SESSION).organization_id
    for i in range(n):
        contact = Contact.objects.create(organization_id=org_id, phone=f"+55219{i:08d}")
        conversation = Conversation.objects.create(
            organization_id=org_id, contact=contact, external_chat_id=f"55219{i:08d}@c.us"
        )
        send_message(conversation=conversation, body=f"Pedido {i} enviado", is_template=True)


def drain(env: dict[str, str], concurrency: int) -> float:
    command = [sys.executable, str(REPO_ROOT / "manage.py"), "drain_events", "--once"]
    command += ["--no-listen", "--consumer", "whatsapp-send-worker"]
    command += ["--concurrency", str(concurrency), "--batch-size", "100"]
    started = time.perf_counter()
    subprocess.run(command, env=env, cwd=REPO_ROOT, check=True, capture_output=True)
    return time.perf_counter() - started


def raw_posts(url: str, n: int, concurrency: int) -> float:
    import httpx

    def worker(count: int) -> None:
        with httpx.Client(timeout=30) as client:
            for i in range(count):
                client.post(
                    f"{url}/api/sendText",
                    json={"session": SESSION, "chatId": f"55218{i:08d}@c.us", "text": "raw"},
                ).raise_for_status()

    shares = [n // concurrency + (1 if i < n % concurrency else 0) for i in range(concurrency)]
    threads = [threading.Thread(target=worker, args=(s,)) for s in shares if s]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return n / (time.perf_counter() - started)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--webhooks", type=int, help="inbound webhooks (default 2000; 300 quick)")
    parser.add_argument("--sends", type=int, help="queued messages (default 1000; 200 quick)")
    parser.add_argument("--concurrency", type=int, default=8, help="clients / send threads")
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    args = parser.parse_args(argv)
    args.webhooks = args.webhooks or (300 if args.quick else 2000)
    args.sends = args.sends or (200 if args.quick else 1000)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from tests.support.waha import fake_waha

    scratch = ScratchDatabase.beside("wabench")
    os.environ.update(production_settings())  # the deploy checks refuse development defaults
    env = scratch.env(
        LOG_LEVEL="WARNING",
        GUNICORN_LOG_LEVEL="warning",
        DB_CONN_MAX_AGE="600",
        ALLOWED_HOSTS="localhost,127.0.0.1",
        WAHA_ALLOW_PRIVATE_TARGETS="true",
    )
    say(f"re-creating and migrating scratch database {scratch.name}")
    scratch.recreate(env)
    problems: list[str] = []
    with fake_waha() as waha:
        waha.sessions[SESSION] = "WORKING"
        setup_django(scratch, waha.url)
        from crm.models import Message
        from eventbus.store.models import EventLog

        port = free_port()
        say(f"starting gunicorn on 127.0.0.1:{port}")
        server = start_gunicorn(env, port)
        try:
            drive(port, [ping] * 200, args.concurrency)  # warm-up
            floor, floor_statuses = drive(port, [ping] * args.webhooks, args.concurrency)
            bodies = [post_webhook(webhook(n)) for n in range(args.webhooks)]
            inbound, statuses = drive(port, bodies, args.concurrency)
        finally:
            stop(server)
        received = EventLog.objects.filter(event_type="message.received").count()
        if statuses != {200: args.webhooks} or received != args.webhooks:
            problems.append(f"webhooks: statuses {statuses}, {received} message.received")

        say(f"queueing {args.sends} messages")
        queue_sends(args.sends)
        wall = drain(env, args.concurrency)
        startup = drain(env, args.concurrency)  # nothing left: the process's fixed cost
        sends = args.sends / max(wall - startup, 1e-6)
        sent = Message.objects.filter(status="sent").count()
        if sent != args.sends or len(waha.sends()) != args.sends:
            problems.append(f"sends: {sent} sent, {len(waha.sends())} requests for {args.sends}")
        raw = raw_posts(waha.url, args.sends, args.concurrency)
    print(f"\nWhatsApp bench, {args.concurrency} clients/threads, 127.0.0.1 (indicative figures)")
    print(f"{'measure':<34} {'per s':>9} {'ratio':>7}")
    print(f"{'GET /api/ping (floor)':<34} {floor:>9.0f} {1.0:>7.2f}")
    print(f"{'inbound webhook -> message.received':<34} {inbound:>9.0f} {inbound / floor:>7.2f}")
    print(f"{'raw httpx POST /api/sendText':<34} {raw:>9.0f} {1.0:>7.2f}")
    print(f"{'message.queued -> sendText (drain)':<34} {sends:>9.0f} {sends / raw:>7.2f}")
    print(f"(drain wall {wall:.2f} s minus an empty run's {startup:.2f} s; ping {floor_statuses})")
    print(
        f"webhooks_per_s={inbound:.0f} webhook_ratio_to_ping={inbound / floor:.2f} "
        f"sends_per_s={sends:.0f} send_ratio_to_raw_post={sends / raw:.2f}"
    )
    for problem in problems:
        say(f"PROBLEM: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
