"""Database backups to a Django storage, and a restore check that proves a dump restores.

`backup_create` opens a REPEATABLE READ transaction, exports its snapshot, counts the core
tables' rows in it and runs pg_dump on the same snapshot, so the counts written to the manifest
are exactly what the dump holds even while the application writes. `restore_check_run`
restores the newest dump into a scratch database, counts the same tables there, drops the
scratch database and compares. `backup_prune` applies the retention (BACKUP_RETENTION_DAYS).
The `backups` storage is the filesystem or an S3-compatible bucket (settings.STORAGES), so the
same code keeps copies off the host.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from django.apps import apps
from django.conf import settings
from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages
from django.db import connection
from psycopg import sql

from core import pooler, restore_scope
from core.db import drop_database
from core.pg_tools import tools_for

PREFIX = "deskcomm-"
STAMP_FORMAT = "%Y%m%dT%H%M%S%fZ"


@dataclass
class RestoreVerdict:
    """The outcome of a restore check: which dump, and the tables whose counts differ."""

    dump: str
    expected: dict[str, int]
    restored: dict[str, int]
    mismatches: dict[str, tuple[int, int | None]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.mismatches


def backup_storage() -> Storage:
    return storages["backups"]


def core_tables() -> list[str]:
    """The tables of the registered apps' concrete models (what a restore must bring back:
    core.restore_scope)."""
    return sorted(
        model._meta.db_table
        for label in restore_scope.labels()
        for model in apps.get_app_config(label).get_models()
        if model._meta.managed and not model._meta.proxy
    )


def backup_create() -> str:
    """Dump the database (custom format) with its row counts; returns the dump's storage name."""
    stamp = dt.datetime.now(tz=dt.UTC).strftime(STAMP_FORMAT)
    name = f"{PREFIX}{stamp}.dump"
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / name
        with psycopg.connect(**_conninfo()) as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            snapshot = conn.execute("SELECT pg_export_snapshot()").fetchone()[0]  # type: ignore[index]
            counts = _count_rows(conn, core_tables())
            # Row-level security: this command bypasses it (core.rls); pg_dump must be told
            # to let the policies apply instead of refusing tables that have them.
            _pg("pg_dump", "--format=custom", "--enable-row-security", f"--snapshot={snapshot}",
                f"--file={path}")  # fmt: skip
            conn.rollback()
        manifest = {"dump": name, "created_at": stamp, "counts": counts, "sha256": _sha256(path)}
        storage = backup_storage()
        with path.open("rb") as handle:
            saved = storage.save(name, File(handle))
        storage.save(_manifest_name(saved), ContentFile(json.dumps(manifest, indent=2).encode()))
    return saved


def complete_dumps() -> list[str]:
    """The dumps that have a manifest, oldest first (names sort by time)."""
    _, files = backup_storage().listdir("")
    dumps = sorted(f for f in files if f.startswith(PREFIX) and f.endswith(".dump"))
    return [d for d in dumps if _manifest_name(d) in files]


def latest_dump() -> str | None:
    """The newest dump that has a manifest."""
    dumps = complete_dumps()
    return dumps[-1] if dumps else None


def backup_prune(*, now: dt.datetime | None = None) -> list[str]:
    """Delete dumps (and manifests) older than BACKUP_RETENTION_DAYS; the newest always stays."""
    now = now or dt.datetime.now(tz=dt.UTC)
    cutoff = now - dt.timedelta(days=settings.BACKUP_RETENTION_DAYS)
    storage = backup_storage()
    expired = [d for d in complete_dumps()[:-1] if dump_time(d) < cutoff]
    for dump in expired:
        storage.delete(dump)
        storage.delete(_manifest_name(dump))
    return expired


def dump_time(dump: str) -> dt.datetime:
    """When a dump was taken, from its name."""
    return stamp_time(dump, PREFIX, ".dump")


def stamp_time(name: str, prefix: str, suffix: str) -> dt.datetime:
    """The time in a stored name `<prefix><stamp><suffix>`."""
    stamp = name.removeprefix(prefix).removesuffix(suffix)
    return dt.datetime.strptime(stamp, STAMP_FORMAT).replace(tzinfo=dt.UTC)


def restore_check_run(dump: str) -> RestoreVerdict:
    """Restore `dump` into a scratch database, compare row counts, drop the scratch database."""
    storage = backup_storage()
    with storage.open(_manifest_name(dump)) as handle:
        expected: dict[str, int] = json.load(handle)["counts"]
    scratch_db = f"{connection.settings_dict['NAME']}_restore_check"
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / dump
        with storage.open(dump) as source, path.open("wb") as target:
            for chunk in source.chunks():
                target.write(chunk)
        _recreate(scratch_db)
        try:
            listing = Path(scratch) / "restore.list"
            listing.write_text(restorable_listing(_pg("pg_restore", "--list", str(path))))
            # --no-comments: COMMENT ON EXTENSION vector needs the extension's owner (a
            # superuser), which the application role is not; the counts need no comments.
            _pg("pg_restore", "--no-owner", "--no-privileges", "--no-comments", "--exit-on-error",
                f"--use-list={listing}", f"--dbname={scratch_db}", str(path))  # fmt: skip
            with psycopg.connect(**{**_conninfo(), "dbname": scratch_db}) as conn:
                restored = _count_rows(conn, list(expected))
        finally:
            _drop(scratch_db)
    verdict = RestoreVerdict(dump, expected, restored)
    for table, count in expected.items():
        if restored.get(table) != count:
            verdict.mismatches[table] = (count, restored.get(table))
    return verdict


# -- folders (WAHA's sessions) --------------------------------------------------------------

FOLDER_SUFFIX = ".tar.gz"


def folder_backup_create(root: Path, *, prefix: str) -> str:
    """A gzip tar of the folder `root` (regular files only) in the backups storage, with a
    manifest of each file's sha256; returns the archive's storage name."""
    stamp = dt.datetime.now(tz=dt.UTC).strftime(STAMP_FORMAT)
    name = f"{prefix}{stamp}{FOLDER_SUFFIX}"
    files = sorted(path for path in root.rglob("*") if path.is_file() and not path.is_symlink())
    digests = {str(path.relative_to(root)): _sha256(path) for path in files}
    storage = backup_storage()
    with tempfile.TemporaryDirectory() as scratch:
        archive = Path(scratch) / name
        with tarfile.open(archive, "w:gz") as tar:
            for path in files:
                tar.add(path, arcname=str(path.relative_to(root)), recursive=False)
        with archive.open("rb") as handle:
            saved = storage.save(name, File(handle))
    manifest = {"archive": saved, "created_at": stamp, "files": digests}
    storage.save(_folder_manifest_name(saved), ContentFile(json.dumps(manifest, indent=2).encode()))
    return saved


def folder_backups(prefix: str) -> list[str]:
    """The folder archives of `prefix` that have a manifest, oldest first."""
    _, files = backup_storage().listdir("")
    return sorted(
        f
        for f in files
        if f.startswith(prefix) and f.endswith(FOLDER_SUFFIX) and _folder_manifest_name(f) in files
    )


def latest_folder_backup(prefix: str) -> str | None:
    """The newest folder archive of `prefix` that has a manifest."""
    archives = folder_backups(prefix)
    return archives[-1] if archives else None


def folder_backup_prune(prefix: str, *, now: dt.datetime | None = None) -> list[str]:
    """Delete archives of `prefix` older than BACKUP_RETENTION_DAYS; the newest always stays."""
    now = now or dt.datetime.now(tz=dt.UTC)
    cutoff = now - dt.timedelta(days=settings.BACKUP_RETENTION_DAYS)
    storage = backup_storage()
    expired = [
        a for a in folder_backups(prefix)[:-1] if stamp_time(a, prefix, FOLDER_SUFFIX) < cutoff
    ]
    for archive in expired:
        storage.delete(archive)
        storage.delete(_folder_manifest_name(archive))
    return expired


def folder_restore_check(archive: str) -> list[str]:
    """Extract `archive` into a scratch folder and compare it with its manifest: the files
    missing, different or unexpected (empty when it restores exactly)."""
    storage = backup_storage()
    with storage.open(_folder_manifest_name(archive)) as handle:
        expected: dict[str, str] = json.load(handle)["files"]
    with tempfile.TemporaryDirectory() as scratch, storage.open(archive) as source:
        target = Path(scratch)
        with tarfile.open(fileobj=source, mode="r:gz") as tar:
            tar.extractall(target, filter="data")  # no absolute paths, links out, devices
        found = {
            str(path.relative_to(target)): _sha256(path)
            for path in target.rglob("*")
            if path.is_file()
        }
    problems = [f"missing: {f}" for f in sorted(expected.keys() - found.keys())]
    problems += [f"unexpected: {f}" for f in sorted(found.keys() - expected.keys())]
    problems += [
        f"different: {f}" for f in sorted(expected.keys() & found.keys()) if expected[f] != found[f]
    ]
    return problems


# -- helpers --------------------------------------------------------------------------------


def _conninfo() -> dict[str, Any]:
    s = connection.settings_dict
    info = {"dbname": s["NAME"], "user": s["USER"], "host": s["HOST"] or "127.0.0.1"}
    info.update({"port": s["PORT"] or 5432, "password": s.get("PASSWORD") or None})
    info.update(pooler.direct_params())  # pg_dump needs a session: never through a pooler
    return {k: v for k, v in info.items() if v is not None}


# Server-monitoring extensions a superuser may have added to the database (pg_stat_statements
# feeds the slow-queries view): they hold none of our data, and the role the check restores as
# may not create them (not trusted extensions), so the check leaves them out.
MONITORING_EXTENSIONS = frozenset({"pg_stat_statements"})


def restorable_listing(toc: str) -> str:
    """`pg_restore --list` output without the monitoring extensions' entries (the extension and
    its comment: `... EXTENSION - <name> ...`, `... COMMENT - EXTENSION <name> ...`)."""

    def monitoring(line: str) -> bool:
        words = line.split()
        return "EXTENSION" in words and bool(MONITORING_EXTENSIONS.intersection(words))

    return "".join(line + "\n" for line in toc.splitlines() if not monitoring(line))


def _pg(tool: str, *args: str) -> str:
    """Run a client tool against the database (credentials travel in the environment); its
    standard output."""
    info = _conninfo()
    env = {
        **os.environ,
        "PGHOST": info["host"],
        "PGPORT": str(info["port"]),
        "PGUSER": info["user"],
    }
    env["PGDATABASE"] = info["dbname"]
    if "password" in info:
        env["PGPASSWORD"] = info["password"]
    binary = tools_for(_server_major()) / tool
    command = [str(binary), *args]  # a known binary; arguments are ours, never user input
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)  # noqa: S603
    if result.returncode != 0:
        raise RuntimeError(f"{tool} failed ({result.returncode}): {result.stderr.strip()[-2000:]}")
    return result.stdout


def _server_major() -> int:
    connection.ensure_connection()
    return int(connection.pg_version // 10000)  # type: ignore[attr-defined]


def _count_rows(conn: psycopg.Connection[Any], tables: list[str]) -> dict[str, int]:
    counts = {}
    for table in tables:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
        ).fetchone()
        counts[table] = int(row[0]) if row else 0
    return counts


def _recreate(name: str) -> None:
    _drop(name)
    with psycopg.connect(**_conninfo(), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def _drop(name: str) -> None:
    with psycopg.connect(**_conninfo(), autocommit=True) as conn:
        drop_database(conn, name)


def _manifest_name(dump: str) -> str:
    return dump.removesuffix(".dump") + ".json"


def _folder_manifest_name(archive: str) -> str:
    return archive.removesuffix(FOLDER_SUFFIX) + ".json"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
