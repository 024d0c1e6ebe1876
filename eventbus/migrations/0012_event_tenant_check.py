"""event_log.organization_id: one tenant check per emit statement instead of one per event.

The deferred foreign-key check ran a lookup and a row lock per event at every emit's commit.
Every emit path now locks the organization row itself, once per statement (`FOR KEY SHARE`, what
the constraint's check takes), and writes nothing when it does not exist: `eventbus.emit` and
`emit_many` in their INSERT statements, the `emit_event` SQL function here.
"""

from importlib import import_module
from typing import Any

import django.db.models.deletion
from django.db import migrations, models

PREVIOUS_EMIT_EVENT_SQL: str = import_module(
    "eventbus.migrations.0008_delivery_event_type"
).EMIT_EVENT_SQL
ORGANIZATION_REQUIRED = """        RAISE EXCEPTION 'emit_event: organization is required (every event belongs to a tenant)'
              USING ERRCODE = '22023';
    END IF;
"""
TENANT_CHECK = """    -- The tenant must exist, and cannot be deleted before this transaction ends.
    PERFORM 1 FROM deskcomm_organization WHERE id = p_organization_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'emit_event: organization % does not exist', p_organization_id
              USING ERRCODE = '23503';
    END IF;
"""
assert ORGANIZATION_REQUIRED in PREVIOUS_EMIT_EVENT_SQL
EMIT_EVENT_SQL = PREVIOUS_EMIT_EVENT_SQL.replace(
    ORGANIZATION_REQUIRED, ORGANIZATION_REQUIRED + TENANT_CHECK
)


def add_tenant_check(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(EMIT_EVENT_SQL)


def remove_tenant_check(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(PREVIOUS_EMIT_EVENT_SQL)


class Migration(migrations.Migration):
    dependencies = [
        ("deskcomm", "0007_lgpd_personal_data"),
        ("eventbus", "0011_delivery_hot_path"),
    ]

    operations = [
        migrations.RunPython(add_tenant_check, remove_tenant_check),
        migrations.AlterField(
            model_name="eventlog",
            name="organization",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="events",
                to="deskcomm.organization",
            ),
        ),
    ]
