"""emit_event: `ON CONFLICT DO NOTHING` without a conflict target.

On an unpartitioned event_log the arbiter is still the unique index on (organization_id,
idempotency_key). A partitioned event_log (eventbus/history/partitions.py, `manage.py partition_event_log`)
cannot have that index (a unique index on a partitioned table must include `created_at`): there a
BEFORE INSERT trigger claims the key in the unpartitioned `event_log_idempotency` table and skips
the row when another event holds it, and a statement naming the old conflict target would fail.
The frozen copy below is eventbus/store/sql/emit_event.sql at this migration.
"""

from importlib import import_module
from typing import Any

from django.db import migrations

PREVIOUS_EMIT_EVENT_SQL: str = import_module(
    "eventbus.migrations.0020_ordering_and_priority"
).EMIT_EVENT_SQL
TARGETED = (
    "        ON CONFLICT (organization_id, idempotency_key) WHERE idempotency_key IS NOT NULL"
    " DO NOTHING\n"
)
UNTARGETED = (
    "        -- No conflict target: the unique index, or when partitioned the key trigger"
    " (partitions.py).\n"
    "        ON CONFLICT DO NOTHING\n"
)
assert TARGETED in PREVIOUS_EMIT_EVENT_SQL
EMIT_EVENT_SQL = PREVIOUS_EMIT_EVENT_SQL.replace(TARGETED, UNTARGETED)


def forwards(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(EMIT_EVENT_SQL)


def backwards(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(PREVIOUS_EMIT_EVENT_SQL)


class Migration(migrations.Migration):
    dependencies = [("eventbus", "0020_ordering_and_priority")]

    operations = [migrations.RunPython(forwards, backwards)]
