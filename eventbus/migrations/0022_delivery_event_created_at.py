"""Deliveries and their attempts carry their event's `created_at` (`event_created_at`).

It is the partition key of a partitioned install (eventbus/history/partitions.py, `manage.py
partition_event_log`): the delivery and attempt tables are partitioned by the month of their
event, like `event_log`, so archiving a month drops three partitions instead of deleting the
month's deliveries and attempts row by row. Every path that writes a delivery sets it (the emit
statements, `emit_event()` below, replay, restore; attempts copy their delivery's). Rows written
before this migration keep NULL: the column is added without a rewrite, and the partition upgrade
fills it as it copies them.

The attempt log's key to its delivery loses its database constraint (so do webhook attempts',
webhooks 0004): a partitioned table's primary key is (id, event_created_at), which a key on
`delivery_id` alone cannot reference. Django still cascades; the archive and the organization
cascade delete attempts before deliveries. The frozen copy below is eventbus/store/sql/emit_event.sql
at this migration.
"""

from importlib import import_module
from typing import Any

import django.db.models.deletion
from django.db import migrations, models

PREVIOUS_EMIT_EVENT_SQL: str = import_module(
    "eventbus.migrations.0021_emit_event_any_conflict"
).EMIT_EVENT_SQL
COLUMNS = "                                       priority, created_at, updated_at)\n"
VALUES = "               CASE WHEN r.ordered THEN v_order END, v_priority, now(), now()\n"
for part in (COLUMNS, VALUES):
    assert PREVIOUS_EMIT_EVENT_SQL.count(part) == 1, part
EMIT_EVENT_SQL = PREVIOUS_EMIT_EVENT_SQL.replace(
    COLUMNS, COLUMNS.replace("updated_at)", "updated_at, event_created_at)")
).replace(VALUES, VALUES.replace("now(), now()", "now(), now(), now()"))


def forwards(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(EMIT_EVENT_SQL)


def backwards(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(PREVIOUS_EMIT_EVENT_SQL)


class Migration(migrations.Migration):
    dependencies = [("eventbus", "0021_emit_event_any_conflict")]

    operations = [
        migrations.AddField(
            model_name="delivery",
            name="event_created_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="deliveryattempt",
            name="event_created_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AlterField(
            model_name="deliveryattempt",
            name="delivery",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="attempt_log",
                to="eventbus.delivery",
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
