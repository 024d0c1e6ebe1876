"""The TLS front (issue 42, item 4): deploy/caddy/Caddyfile through `caddy validate` and
`caddy adapt` (Debian's caddy; .ci/run installs it), asserting HSTS, the body limit and
timeouts of the app behind it and the optional allowlist of /admin/ and /api/docs/."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest
from django.conf import settings

from tests.deploy.test_deployment import REPO, compose, volume_mounts
from tests.deploy.test_monitoring_stack import tool

CADDYFILE = REPO / "deploy" / "caddy" / "Caddyfile"
DOMAIN = "crm.example.com"


def caddy(command: str, **env: str) -> subprocess.CompletedProcess[str]:
    binary = tool("caddy", "caddy")
    return subprocess.run(
        [binary, command, "--config", str(CADDYFILE), "--adapter", "caddyfile"],
        env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **env},
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip


def adapted(**env: str) -> dict[str, Any]:
    done = caddy("adapt", DESKCOMM_DOMAIN=DOMAIN, **env)
    assert done.returncode == 0, done.stderr
    config: dict[str, Any] = json.loads(done.stdout)
    return config


def handlers(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Every handler of the site's routes, flattened (subroutes included)."""
    found: list[dict[str, Any]] = []

    def walk(routes: list[dict[str, Any]]) -> None:
        for route in routes:
            for handle in route.get("handle", []):
                found.append({**handle, "_match": route.get("match", [])})
                walk(handle.get("routes", []))

    (server,) = config["apps"]["http"]["servers"].values()
    walk(server["routes"])
    return found


def test_the_caddyfile_is_valid() -> None:
    done = caddy("validate", DESKCOMM_DOMAIN=DOMAIN)
    assert done.returncode == 0, done.stderr
    assert "Valid configuration" in done.stdout + done.stderr


def test_hsts_and_the_apps_own_limits() -> None:
    config = adapted()
    all_handlers = handlers(config)
    headers = [h for h in all_handlers if h["handler"] == "headers"]
    hsts = headers[0]["response"]["set"]["Strict-Transport-Security"][0]
    assert hsts.startswith("max-age=") and int(hsts.split("=")[1].split(";")[0]) >= 31536000
    (body,) = [h for h in all_handlers if h["handler"] == "request_body"]
    assert body["max_size"] == settings.DATA_UPLOAD_MAX_MEMORY_SIZE  # 413 past it
    (proxy,) = [h for h in all_handlers if h["handler"] == "reverse_proxy"]
    assert proxy["upstreams"] == [{"dial": "web:8000"}]
    gunicorn_timeout = 30  # gunicorn.conf.py's GUNICORN_TIMEOUT default
    assert f'"GUNICORN_TIMEOUT", "{gunicorn_timeout}"' in (REPO / "gunicorn.conf.py").read_text()
    second = 1_000_000_000
    assert proxy["transport"]["response_header_timeout"] == gunicorn_timeout * second
    (server,) = config["apps"]["http"]["servers"].values()
    assert server["read_timeout"] == gunicorn_timeout * second
    # Set in .env, both follow: the proxy reads the same variables as the app.
    tuned = adapted(GUNICORN_TIMEOUT="60", DATA_UPLOAD_MAX_MEMORY_SIZE="2097152")
    (body,) = [h for h in handlers(tuned) if h["handler"] == "request_body"]
    assert body["max_size"] == 2097152
    (server,) = tuned["apps"]["http"]["servers"].values()
    assert server["read_timeout"] == 60 * second


@pytest.mark.parametrize(
    ("allowlist", "ranges"),
    [
        (None, ["0.0.0.0/0", "::/0"]),
        ("203.0.113.7/32 10.0.0.0/8", ["203.0.113.7/32", "10.0.0.0/8"]),
    ],
)
def test_the_admin_and_api_docs_are_refused_outside_the_allowlist(
    allowlist: str | None, ranges: list[str]
) -> None:
    env = {} if allowlist is None else {"ADMIN_ALLOWLIST": allowlist}
    (refusal,) = [h for h in handlers(adapted(**env)) if h["handler"] == "static_response"]
    assert refusal["status_code"] == 403
    (match,) = refusal["_match"]
    assert {"/admin", "/admin/*", "/api/docs", "/api/docs/*"} <= set(match["path"])
    assert match["not"] == [{"remote_ip": {"ranges": ranges}}]


def test_the_production_compose_runs_the_front_with_this_caddyfile() -> None:
    data = compose("docker-compose.prod.yml")
    front = data["services"]["caddy"]
    assert (REPO / volume_mounts(front)["/etc/caddy/Caddyfile"]).resolve() == CADDYFILE
    assert {"80:80", "443:443"} <= set(front["ports"])
    env = front["environment"]
    assert env["DESKCOMM_DOMAIN"].startswith("${DESKCOMM_DOMAIN:?")
    for name in ("ADMIN_ALLOWLIST", "GUNICORN_TIMEOUT", "DATA_UPLOAD_MAX_MEMORY_SIZE"):
        assert name in env, name
    assert front["depends_on"] == {"web": {"condition": "service_healthy"}}
    # Certificates survive a restart; the web port is not public (loopback only).
    assert "/data" in volume_mounts(front)
    assert all(p.startswith("127.0.0.1:") for p in data["services"]["web"]["ports"])
