"""The DLQ's size per (event type, consumer, organization), counted by a loose index scan.

The status page, the queue gauges and the per-tenant gauges of /metrics counted every dead letter
through a hash aggregate: at 10 M events of history (332,775 dead letters, bench/scale.py) that
was ~120 ms of each status page view and each scrape. `sql/dlq_sizes.sql` walks this index's
groups and counts each as a range: 41-56 ms on the same rows. It leads with `event_type`, so it
also serves the DLQ's event-type filter choices, which `delivery_dead_type_idx` served.

Both indexes are partial (dead rows only): building this one reads the table once; claims and
settles of live work never write to either.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0012_api_key_authenticate_local"),
        ("eventbus", "0022_delivery_event_created_at"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(
                condition=models.Q(("status", "dead")),
                fields=["event_type", "consumer", "organization"],
                name="delivery_dead_group_idx",
            ),
        ),
        migrations.RemoveIndex(model_name="delivery", name="delivery_dead_type_idx"),
    ]
