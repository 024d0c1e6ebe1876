"""Ordered consumers: which keys have a delivery running, one index probe per key.

The ordered claim (claim.sql) used to scan a pair's whole due backlog in claim order, probing
every row for an earlier or running delivery of its key: with 200 conversations 100 deep that
was 20,000 probes for 200 heads (83 ms a claim). It now takes its candidates from two bounded
lists (the first rows in claim order and a walk over the keys) and asks this index whether a
candidate's key is busy. Only running keyed deliveries are in it: unordered consumers never
write it, and an ordered claim or settle writes one entry.

Built online (core.migration_ops.add_index_online): CONCURRENTLY on the plain table, partition
by partition on the partitioned one, so emits, claims and settles go on while it builds.
"""

from django.db import migrations, models

from core.migration_ops import add_index_online

INDEX = models.Index(
    condition=models.Q(("ordering_key__isnull", False), ("status", "processing")),
    fields=["consumer", "organization", "ordering_key"],
    name="delivery_ordering_busy_idx",
)


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run inside a transaction

    dependencies = [("eventbus", "0024_search_retry_traceback")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                add_index_online(
                    "delivery_ordering_busy_idx",
                    "eventbus_delivery",
                    "(consumer, organization_id, ordering_key)"
                    " WHERE ordering_key IS NOT NULL AND status = 'processing'",
                )
            ],
            state_operations=[migrations.AddIndex(model_name="delivery", index=INDEX)],
        )
    ]
