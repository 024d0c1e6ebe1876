"""event_log.organization_id: one tenant check per emit statement instead of one per event.

The deferred foreign-key check ran a lookup and a row lock per event at every emit's commit.
Every emit path now locks the organization row itself, once per statement (`FOR KEY SHARE`, what
the constraint's check takes), and writes nothing when it does not exist: `eventbus.emit` and
`emit_many` in their INSERT statements, the `emit_event` SQL function here.

The seed's `on delete cascade` is kept at the database level by a trigger: deleting an
organization (Django's cascade deletes the rows first; a raw DELETE relies on it) deletes its
events, deliveries and attempts. An emit holding the organization row makes the delete wait, and
the trigger's statements then see the emitted rows too, so none is left behind.
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


CASCADE_SQL = """
CREATE FUNCTION eventbus_organization_deleted() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    DELETE FROM eventbus_deliveryattempt a USING eventbus_delivery d, event_log e
     WHERE a.delivery_id = d.id AND d.event_id = e.id AND e.organization_id = OLD.id;
    DELETE FROM eventbus_delivery d USING event_log e
     WHERE d.event_id = e.id AND e.organization_id = OLD.id;
    DELETE FROM event_log WHERE organization_id = OLD.id;
    RETURN OLD;
END
$$;
CREATE TRIGGER eventbus_organization_cascade BEFORE DELETE ON deskcomm_organization
    FOR EACH ROW EXECUTE FUNCTION eventbus_organization_deleted();
"""
DROP_CASCADE_SQL = """
DROP TRIGGER eventbus_organization_cascade ON deskcomm_organization;
DROP FUNCTION eventbus_organization_deleted();
"""


def add_tenant_check(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(EMIT_EVENT_SQL)


def remove_tenant_check(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(PREVIOUS_EMIT_EVENT_SQL)


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0007_lgpd_personal_data"),
        ("eventbus", "0011_delivery_hot_path"),
    ]

    operations = [
        migrations.RunPython(add_tenant_check, remove_tenant_check),
        migrations.RunSQL(CASCADE_SQL, DROP_CASCADE_SQL),
        migrations.AlterField(
            model_name="eventlog",
            name="organization",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="events",
                to="core.organization",
            ),
        ),
    ]
