"""`manage.py slow_queries`: the 20 statements with the highest mean time (pg_stat_statements)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.slow_queries import TOP, top

NOT_READY = (
    "pg_stat_statements is not available: set shared_preload_libraries = 'pg_stat_statements' "
    "on the server (a restart), then CREATE EXTENSION pg_stat_statements as a superuser."
)


class Command(BaseCommand):
    help = "Print the slowest SQL statements by mean time (pg_stat_statements, top 20)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--limit", type=int, default=TOP)

    def handle(self, *args: Any, **options: Any) -> None:
        statements = top(options["limit"])
        if statements is None:
            raise CommandError(NOT_READY)
        self.stdout.write("mean_ms\ttotal_ms\tcalls\tqueryid\tquery")
        for s in statements:
            text = " ".join(s.query.split())
            self.stdout.write(f"{s.mean_ms:.2f}\t{s.total_ms:.1f}\t{s.calls}\t{s.queryid}\t{text}")
