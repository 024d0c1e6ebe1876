"""`manage.py partition_event_log`: the bus tables to monthly partitions online.

Without options: the upgrade of event_log, eventbus_delivery and eventbus_deliveryattempt
(eventbus/history/partition_upgrade.py; emits and workers keep running; re-run it after an
interruption). `--ahead` only creates the partitions ahead (what the `event-log-partitions` job
does); `--drop-old` drops the unpartitioned copies the upgrade kept, once you have checked the
partitioned tables.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from eventbus.history import partition_upgrade, partitions


class Command(BaseCommand):
    help = (
        "Partition event_log, its deliveries and their attempts by month, online, in batches "
        "(or keep the partitions ahead)."
    )

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
            help="Drop the unpartitioned tables an upgrade kept (<table>_unpartitioned).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["batch"] < 1:
            raise CommandError("--batch must be at least 1")
        if options["drop_old"]:
            dropped = partition_upgrade.drop_old()
            self.stdout.write(f"dropped {', '.join(dropped)}" if dropped else "nothing to drop")
            return
        if options["ahead"]:
            if not partitions.partitioned_tables():
                raise CommandError("event_log is not partitioned: run partition_event_log first")
            created = partitions.ensure_partitions()
            self.stdout.write(f"created {len(created)} partition(s): {', '.join(created)}")
            return
        try:
            report = partition_upgrade.upgrade(batch=options["batch"], progress=self._progress)
        except partitions.PartitionError as exc:
            raise CommandError(str(exc)) from exc
        olds = ", ".join(partitions.BY_NAME[name].unpartitioned_name for name in report.tables)
        self.stdout.write(
            f"partitioned {', '.join(report.tables)}: {report.partitions} partition(s), "
            f"{report.copied} rows copied in {report.batches} batch(es), {report.seconds:.1f}s; "
            f"the old tables are {olds} (drop them with --drop-old once checked)"
        )

    def _progress(self, report: partition_upgrade.UpgradeReport) -> None:
        if report.batches % 20 == 0:
            self.stdout.write(
                f"  {report.copied} rows copied ({report.batches} batches; now {report.table})"
            )
