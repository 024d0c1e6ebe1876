"""The console's partial search, its "retrying" and "discarded" views, Retry now, tracebacks.

- `deliveryattempt.traceback`: the failed handler's traceback (eventbus/store/tracebacks.py), written
  by the nack with the attempt row; nullable, so archived attempts restored from days written
  before it (jsonb_populate_record leaves the key NULL) still load.
- `delivery_retrying_idx` / `delivery_discarded_idx`: the deliveries list's "retrying" (pending
  after a failure) and "discarded" filters, newest first. Only a nack (retrying) or an operator's
  Discard writes an entry: emits, claims and acks of healthy work never do.
- `delivery_dead_short_id_idx`: the DLQ searched by the short id it shows (the event id's last
  characters, its random part).
- `delivery_error_trgm_idx`: substring search in error texts (`upper(last_error) LIKE '%..%'`)
  through pg_trgm, a trusted extension every PostgreSQL ships in contrib (the embedded server
  too): the database's owner, who migrates, may create it. Only rows with an error are in it.

Every index is partial over rows that failed or were acted on, so building them reads the
delivery table once and the hot path (emit, claim, ack) writes none of them.
"""

import django.contrib.postgres.indexes
from django.contrib.postgres.operations import TrigramExtension
from django.db import migrations, models
from django.db.models.functions import Cast, Right, Upper


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0015_staff_organization"),
        ("eventbus", "0023_delivery_dead_group_idx"),
    ]

    operations = [
        TrigramExtension(),
        migrations.AlterModelOptions(
            name="delivery",
            options={
                "permissions": [
                    ("retry_delivery", "Can retry deliveries waiting to retry now"),
                ],
                "verbose_name_plural": "deliveries",
            },
        ),
        migrations.AddField(
            model_name="deliveryattempt",
            name="traceback",
            field=models.TextField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(
                condition=models.Q(("last_error__isnull", False), ("status", "pending")),
                fields=["id"],
                name="delivery_retrying_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(
                condition=models.Q(("status", "discarded")),
                fields=["id"],
                name="delivery_discarded_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(
                Right(Cast("event_id", models.TextField()), 8),
                condition=models.Q(("status", "dead")),
                name="delivery_dead_short_id_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="delivery",
            index=django.contrib.postgres.indexes.GinIndex(
                django.contrib.postgres.indexes.OpClass(Upper("last_error"), name="gin_trgm_ops"),
                condition=models.Q(("last_error__isnull", False)),
                name="delivery_error_trgm_idx",
            ),
        ),
    ]
