"""A real trigger on the SQL side of the bus: a lead's stage change emits `lead.stage_changed`."""

from __future__ import annotations

from django.db import migrations

TRIGGER_SQL = """
CREATE OR REPLACE FUNCTION deskcomm_lead_stage_changed_emit() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF NEW.stage_id IS DISTINCT FROM OLD.stage_id THEN
        PERFORM emit_event(
            'lead.stage_changed', 'lead', NEW.id,
            jsonb_build_object('from_stage_id', OLD.stage_id, 'to_stage_id', NEW.stage_id,
                               'pipeline_id', NEW.pipeline_id),
            jsonb_build_object('source', 'trigger:deskcomm_lead'),
            NEW.organization_id);
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER lead_stage_changed_emit
    AFTER UPDATE OF stage_id ON deskcomm_lead
    FOR EACH ROW EXECUTE FUNCTION deskcomm_lead_stage_changed_emit();
"""

REVERSE_SQL = """
DROP TRIGGER IF EXISTS lead_stage_changed_emit ON deskcomm_lead;
DROP FUNCTION IF EXISTS deskcomm_lead_stage_changed_emit();
"""


class Migration(migrations.Migration):
    # Written as the `deskcomm` app's migration; an install that applied it there has this one.
    replaces = [("deskcomm", "0002_lead_stage_changed_trigger")]

    dependencies = [
        ("core", "0001_initial"),
        ("eventbus", "0002_emit_event_function"),
    ]

    operations = [migrations.RunSQL(TRIGGER_SQL, REVERSE_SQL)]
