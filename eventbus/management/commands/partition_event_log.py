"""`manage.py partition_event_log`: event_log to monthly partitions online (eventbus/partitions.py).

Without options: the upgrade (emits keep flowing; re-run it after an interruption). `--ahead`
only creates the partitions ahead (what the `event-log-partitions` job does); `--drop-old`
drops the unpartitioned copy the upgrade kept, once you have checked the partitioned log.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from eventbus import partitions


class Command(BaseCommand):
    help = "Partition event_log by month of created_at, online, in batches (or keep it ahead)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--batch", type=int, default=5000, help="Rows copied per transaction (default 5000)."
        )
        parser.add_argument(
            "--ahead",
            action="store_true",
            help="Only create the missing partitions up to EVENT_LOG_PARTITIONS_AHEAD months.",
        )
        parser.add_argument(
            "--drop-old",
            action="store_true",
            help="Drop event_log_unpartitioned, the old table an upgrade kept.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["batch"] < 1:
            raise CommandError("--batch must be at least 1")
        if options["drop_old"]:
            partitions.drop_old()
            self.stdout.write(f"dropped {partitions.OLD_TABLE}")
            return
        if options["ahead"]:
            if not partitions.is_partitioned():
                raise CommandError("event_log is not partitioned: run partition_event_log first")
            created = partitions.ensure_partitions()
            self.stdout.write(f"created {len(created)} partition(s): {', '.join(created)}")
            return
        try:
            report = partitions.upgrade(batch=options["batch"], progress=self._progress)
        except partitions.PartitionError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"event_log partitioned: {report.partitions} partition(s), {report.copied} rows "
            f"copied in {report.batches} batch(es), {report.seconds:.1f}s; the old table is "
            f"{partitions.OLD_TABLE} (drop it with --drop-old once checked)"
        )

    def _progress(self, report: partitions.UpgradeReport) -> None:
        if report.batches % 20 == 0:
            self.stdout.write(f"  {report.copied} rows copied ({report.batches} batches)")
