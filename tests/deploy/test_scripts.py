"""The release path's scripts (issue 42, item 5): shellcheck-clean; deploy/install.sh writes a
.env that passes the production checks; deploy/update.sh pulls, backs up, migrates, restarts one
service at a time behind the health gate and rolls back to the previous tag when a service stays
unhealthy. No Docker engine runs here: update.sh drives a stand-in `docker` executable that
records its calls and answers the health of the tag .env names (docs/deployment.md)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from core import key_variables
from tests.deploy.test_deployment import FILE_ROOTS, REPO, parse_env, under_data
from tests.deploy.test_monitoring_stack import tool
from tests.support.processes import subprocess_env

SCRIPTS = [
    "deploy/install.sh",
    "deploy/update.sh",
    "deploy/alertmanager/render.sh",
    ".ci/run",
    ".ci/brokers",
]
KEYS = tuple(key_variables.VARIABLES.values())
PASSWORDS = (
    "POSTGRES_PASSWORD",
    "DESKCOMM_OWNER_PASSWORD",
    "DESKCOMM_WORKER_PASSWORD",
    "DESKCOMM_WEB_PASSWORD",
)


def checkout(tmp_path: Path) -> Path:
    """The files the scripts use, laid out as in the repository."""
    root = tmp_path / "deskcomm"
    (root / "deploy").mkdir(parents=True)
    for name in (".env.example", "docker-compose.prod.yml", "deploy/install.sh",
                 "deploy/update.sh"):  # fmt: skip
        shutil.copy2(REPO / name, root / name)
    return root


def test_every_shell_script_is_shellcheck_clean() -> None:
    shellcheck = tool("shellcheck", "shellcheck")
    done = subprocess.run(
        [shellcheck, "-x", *SCRIPTS], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.django_db
def test_install_writes_a_production_env_that_passes_the_deploy_checks(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    answers = {
        "DESKCOMM_DOMAIN": "crm.example.com",
        "ADMINS": "ops@example.com",
        "EMAIL_URL": "smtp+tls://alerts:pw@mail.example.com:587",  # pragma: allowlist secret
    }
    env = {"PATH": os.environ["PATH"], **answers}
    run = [str(root / "deploy" / "install.sh"), "--yes", "--env-only"]
    done = subprocess.run(run, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    written = parse_env(root / ".env")
    assert stat.S_IMODE((root / ".env").stat().st_mode) == 0o600
    assert written["DEBUG"] == "false" and written["HTTPS"] == "true"
    assert written["ALLOWED_HOSTS"] == "crm.example.com"
    assert written["PUBLIC_BASE_URL"] == "https://crm.example.com"
    assert written["LGPD_DPO_EMAIL"] == "ops@example.com"  # unanswered: the operator's (E011)
    for key in KEYS:
        Fernet(written[key].encode())  # a valid key
    secrets = [written[name] for name in (*PASSWORDS, "SECRET_KEY", "METRICS_TOKEN")]
    assert all(len(s) >= 24 for s in secrets) and len(set(secrets)) == len(secrets)
    for name in FILE_ROOTS:
        assert under_data(written[name]), name
    # The production checks (deskcomm.E002/E004/E008/E010...) pass on it, roots as in the image.
    app_env = {k: v for k, v in written.items() if not k.startswith("DATABASE_")}
    checked = subprocess.run(
        [os.sys.executable, "manage.py", "check", "--deploy", "--fail-level", "ERROR"],
        cwd=REPO, env=subprocess_env(**app_env), capture_output=True, text=True, check=False,
        timeout=300,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # A second run keeps the .env (its keys decrypt stored data).
    again = subprocess.run(run, env=env, capture_output=True, text=True, check=False)
    assert again.returncode == 0 and "kept" in again.stdout
    assert parse_env(root / ".env") == written
    # Unattended without an answer: refused, naming it.
    (root / ".env").unlink()
    refused = subprocess.run(
        run, env={"PATH": os.environ["PATH"]}, capture_output=True, text=True, check=False
    )
    assert refused.returncode != 0 and "DESKCOMM_DOMAIN is required" in refused.stderr


def test_install_takes_the_dpo_address_or_the_first_operators(tmp_path: Path) -> None:
    answers = {
        "PATH": os.environ["PATH"],
        "DESKCOMM_DOMAIN": "crm.example.com",
        "ADMINS": "ops@example.com, oncall@example.com",
        "EMAIL_URL": "smtp+tls://alerts:pw@mail.example.com:587",  # pragma: allowlist secret
    }
    for name, extra, dpo in (
        ("default", {}, "ops@example.com"),
        ("given", {"LGPD_DPO_EMAIL": "dpo@example.com"}, "dpo@example.com"),
    ):
        root = checkout(tmp_path / name)
        done = subprocess.run(
            [str(root / "deploy" / "install.sh"), "--yes", "--env-only"],
            env={**answers, **extra}, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert parse_env(root / ".env")["LGPD_DPO_EMAIL"] == dpo, name


STAND_IN_DOCKER = """#!/usr/bin/env bash
# Records each call; a container is healthy unless .env names the tag `broken`.
echo "$*" >> "$DOCKER_CALLS"
case "$*" in
    *" ps -q "*) echo container-id ;;
    inspect*) grep -q '^DESKCOMM_VERSION=broken$' .env && echo unhealthy || echo healthy ;;
esac
"""


def update(
    root: Path, tmp_path: Path, tag: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    docker = bin_dir / "docker"
    docker.write_text(STAND_IN_DOCKER)
    docker.chmod(0o755)
    calls = tmp_path / f"calls-{tag}"
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "DOCKER_CALLS": str(calls),
           "HEALTH_TIMEOUT": "10"}  # fmt: skip
    done = subprocess.run(
        [str(root / "deploy" / "update.sh"), tag], env=env, capture_output=True, text=True,
        check=False, timeout=120,
    )  # fmt: skip
    prefix = "compose -f docker-compose.prod.yml "
    return done, [line.removeprefix(prefix) for line in calls.read_text().splitlines()]


def test_update_backs_up_migrates_and_restarts_one_service_at_a_time(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    (root / ".env").write_text("DEBUG=false\nDESKCOMM_VERSION=1.3.0\n")
    done, calls = update(root, tmp_path, "1.4.0")
    assert done.returncode == 0, done.stdout + done.stderr
    assert parse_env(root / ".env")["DESKCOMM_VERSION"] == "1.4.0"
    steps = [c for c in calls if not c.startswith(("inspect", "ps "))]
    assert steps == [
        "pull",
        "run --rm --no-deps jobs python manage.py backup",
        "run --rm migrate",
        *(f"up -d --no-deps {s}" for s in ("web", "worker", "webhooks", "jobs", "scheduler")),
    ]


def test_an_update_that_stays_unhealthy_rolls_back_to_the_previous_tag(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    (root / ".env").write_text("DEBUG=false\nDESKCOMM_VERSION=1.3.0\n")
    done, calls = update(root, tmp_path, "broken")
    assert done.returncode == 1
    assert "web is not healthy" in done.stdout and "rolling back to 1.3.0" in done.stdout
    assert parse_env(root / ".env")["DESKCOMM_VERSION"] == "1.3.0"
    restarts = [c for c in calls if c.startswith("up -d")]
    # web failed on the new tag; then every service back on the previous one.
    assert restarts == [
        "up -d --no-deps web",
        *(f"up -d --no-deps {s}" for s in ("web", "worker", "webhooks", "jobs", "scheduler")),
    ]


def test_ci_runs_ci_run_and_the_image_is_published_on_tags_and_main() -> None:
    import yaml

    def workflow(name: str) -> dict[str, object]:
        data: dict[object, object] = yaml.safe_load(
            (REPO / ".github" / "workflows" / name).read_text()
        )
        # YAML 1.1 reads the key `on` as True.
        return {str(k) if k is not True else "on": v for k, v in data.items()}

    ci = workflow("ci.yml")
    steps = ci["jobs"]["test"]["steps"]  # type: ignore[index]
    assert any(step.get("run") == "bash .ci/run" for step in steps)
    publish = workflow("publish-image.yml")
    assert publish["on"] == {"push": {"branches": ["main"], "tags": ["v*"]}}
    steps = publish["jobs"]["image"]["steps"]  # type: ignore[index]
    (meta,) = [s for s in steps if s.get("id") == "meta"]
    (build,) = [s for s in steps if str(s.get("uses", "")).startswith("docker/build-push")]
    assert build["with"]["push"] is True and "GIT_COMMIT" in build["with"]["build-args"]
    # What it publishes is what the production compose pulls by default.
    image = meta["with"]["images"].replace("${{ github.repository_owner }}", "deskcomm")
    compose_text = (REPO / "docker-compose.prod.yml").read_text()
    assert f"${{DESKCOMM_IMAGE:-{image}}}" in compose_text
