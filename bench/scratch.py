"""A scratch database for a benchmark: `<DATABASE_URL's name>_<suffix>` on the same server.

It is dropped and re-created, then migrated, at the start of a run, and left afterwards for
inspection (the next run drops it). Nothing is read from or written to the base database.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import environ
import psycopg
from psycopg import sql

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/deskcomm"  # as deskcomm/settings.py
# Every encryption key context of deskcomm/settings.py's ENCRYPTION_KEYS, by its variable.
ENCRYPTION_KEY_VARIABLES = (
    "ENCRYPTION_KEYS_WEBHOOKS",
    "ENCRYPTION_KEYS_CPF",
    "ENCRYPTION_KEYS_AI_PROVIDERS",
    "ENCRYPTION_KEYS_OAUTH",
    "ENCRYPTION_KEYS_WAHA",
    "ENCRYPTION_KEYS_PIPELINES",
)


# The file roots a production process checks (deskcomm.E008: not relative, not in the code or
# the temporary directory): a benchmark's go under one folder outside both.
FILE_ROOT_VARIABLES = (
    "MEDIA_ROOT",
    "ARCHIVE_ROOT",
    "BACKUP_ROOT",
    "LGPD_EXPORT_ROOT",
    "READ_ONLY_BUFFER_ROOT",
)
BENCH_DATA_ROOT = Path("/var/tmp/deskcomm-bench")
# deskcomm.E010 wants an alert destination and E011 a DPO address in production; a benchmark's
# alerts and mails go nowhere on purpose (`.invalid` never resolves: a post fails at once and is
# logged).
BENCH_ALERT_WEBHOOK_URL = "https://alerts.invalid/deskcomm-bench"
BENCH_DPO_EMAIL = "dpo@bench.invalid"


def production_settings() -> dict[str, str]:
    """What a process with DEBUG off needs to start (the deploy checks refuse development
    defaults), for what the environment (or `.env`) does not set: a SECRET_KEY and a Fernet key
    per context, fresh for this run, file roots outside the checkout, an alert destination and
    a DPO address. A benchmark measures the production settings."""
    import secrets

    from cryptography.fernet import Fernet

    environ.Env.read_env(REPO_ROOT / ".env", overwrite=False)
    generated = {name: Fernet.generate_key().decode() for name in ENCRYPTION_KEY_VARIABLES}
    generated["SECRET_KEY"] = secrets.token_urlsafe(64)
    generated.update({name: str(BENCH_DATA_ROOT / name.lower()) for name in FILE_ROOT_VARIABLES})
    generated["ALERT_WEBHOOK_URL"] = BENCH_ALERT_WEBHOOK_URL
    generated["LGPD_DPO_EMAIL"] = BENCH_DPO_EMAIL
    return {name: value for name, value in generated.items() if not os.environ.get(name)}


@dataclass(frozen=True)
class ScratchDatabase:
    name: str
    url: str

    @classmethod
    def beside(cls, suffix: str) -> ScratchDatabase:
        """The scratch database next to `DATABASE_URL` (environment, then `.env`, then default)."""
        environ.Env.read_env(REPO_ROOT / ".env", overwrite=False)
        base = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
        parts = urlsplit(base)
        name = f"{parts.path.lstrip('/') or 'deskcomm'}_{suffix}"
        return cls(name, urlunsplit(parts._replace(path="/" + quote(name))))

    def conninfo(self, dbname: str | None = None) -> str:
        config = environ.Env.db_url_config(self.url)
        params: dict[str, Any] = {
            "dbname": dbname or config.get("NAME"),
            "user": config.get("USER"),
            "password": config.get("PASSWORD"),
            "host": config.get("HOST"),
            "port": config.get("PORT"),
            **config.get("OPTIONS", {}),
        }
        return psycopg.conninfo.make_conninfo(**{k: v for k, v in params.items() if v})

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for every process that works on this database."""
        env = dict(os.environ)
        path = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        env.update(DATABASE_URL=self.url, DJANGO_SETTINGS_MODULE="deskcomm.settings")
        env.update(PYTHONPATH=path, **extra)
        return env

    def recreate(self, env: dict[str, str]) -> None:
        """Drop, create and migrate (`manage.py migrate` with `env`)."""
        with psycopg.connect(self.conninfo("postgres"), autocommit=True) as conn:
            ident = sql.Identifier(self.name)
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(ident))
        migrate = [sys.executable, str(REPO_ROOT / "manage.py"), "migrate", "--noinput", "-v", "0"]
        done = subprocess.run(
            migrate, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"migrate failed:\n{done.stdout}{done.stderr}")
