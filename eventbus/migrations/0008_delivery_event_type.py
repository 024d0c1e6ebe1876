"""Deliveries carry their event's type, so per-type metrics and DLQ filters never join the log.

Adds `eventbus_delivery.event_type`, fills it for existing rows, makes it NOT NULL (a writer that
forgets it fails loudly), and teaches the `emit_event` SQL function to set it.
"""

from importlib import import_module
from typing import Any

from django.db import migrations, models

ORIGINAL_EMIT_EVENT_SQL: str = import_module("eventbus.migrations.0004_org_routes").EMIT_EVENT_SQL
ORIGINAL_INSERT = """        INSERT INTO eventbus_delivery (event_id, organization_id, consumer, status, attempts,
                                       max_attempts, next_attempt_at, created_at, updated_at)
        SELECT ev.id, p_organization_id, r.consumer, 'pending', 0, r.max_attempts,"""
INSERT_WITH_TYPE = """        INSERT INTO eventbus_delivery (event_id, organization_id, consumer, event_type, status,
                                       attempts, max_attempts, next_attempt_at, created_at,
                                       updated_at)
        SELECT ev.id, p_organization_id, r.consumer, p_event_type, 'pending', 0, r.max_attempts,"""
assert ORIGINAL_INSERT in ORIGINAL_EMIT_EVENT_SQL
EMIT_EVENT_SQL = ORIGINAL_EMIT_EVENT_SQL.replace(ORIGINAL_INSERT, INSERT_WITH_TYPE)

CURRENT_BODY_SQL = "SELECT prosrc FROM pg_proc WHERE proname = 'emit_event'"


def set_event_type_in_emit_event(apps: Any, schema_editor: Any) -> None:
    """Re-create emit_event with the event_type column, refusing if it changed since 0004.

    A later migration that re-defines emit_event must carry the column itself; this one only
    patches the exact definition (0004_org_routes) it was written against (and fails loudly otherwise, instead of
    silently restoring an old fan-out).
    """
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(CURRENT_BODY_SQL)
        bodies = [row[0] for row in cursor.fetchall()]
        if len(bodies) != 1 or ORIGINAL_INSERT.strip() not in bodies[0]:
            raise RuntimeError(
                "emit_event is not the 0004 definition this migration patches: add the "
                "event_type column to the current definition's delivery INSERT instead"
            )
        cursor.execute(EMIT_EVENT_SQL)


def restore_emit_event(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(ORIGINAL_EMIT_EVENT_SQL)


BACKFILL_SQL = """
UPDATE eventbus_delivery d SET event_type = e.event_type
  FROM event_log e
 WHERE e.id = d.event_id AND d.event_type IS NULL
"""


class Migration(migrations.Migration):
    dependencies = [("eventbus", "0007_admin_console")]

    operations = [
        migrations.AddField(
            model_name="delivery", name="event_type", field=models.TextField(null=True)
        ),
        migrations.RunSQL(BACKFILL_SQL, migrations.RunSQL.noop),
        migrations.AlterField(model_name="delivery", name="event_type", field=models.TextField()),
        migrations.RunPython(set_event_type_in_emit_event, restore_emit_event),
    ]
