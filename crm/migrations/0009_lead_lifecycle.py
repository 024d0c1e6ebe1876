"""A lead's lifecycle: owner, status (open, won, lost), value, soft delete, and their producers.

Every `lead.*` type but `lead.created` (crm.services.lead_create) is emitted by the database, in
the transaction of the row change, through `emit_event()` (seed 000 §3):

- trigger `lead_updated_emit`: `lead.updated` with `changes: {field: {from, to}}` for name,
  source, pipeline, contact and value (not for the changes the other producers report);
- trigger `lead_assigned_emit`: `lead.assigned` when owner_id changes;
- trigger `lead_deleted_emit`: `lead.deleted` when deleted_at is first set (a soft delete);
- functions `mark_lead_won(org, lead, value_cents, reason)` and `mark_lead_lost(org, lead,
  reason)`: close an open lead and emit `lead.won`/`lead.lost`; they return the event id.
  `lead.won`'s `value` is in cents, as the shop's paid-order path has always sent it.

`lead.stage_changed` keeps its trigger (core/migrations/0002). The SQL below is frozen: a change
is a new migration.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


# What a trigger's event says about its producer (the bus writes `provenance` on Python emits).
def _metadata(trigger: str) -> str:
    return (
        f"jsonb_build_object('source', 'trigger:{trigger}', 'provenance', jsonb_build_object("
        f"'door', 'app', 'producer', 'app:crm', 'component', 'trigger:{trigger}'))"
    )


# lead_updated_emit reports these columns' changes (the others have their own events).
UPDATED_COLUMNS = ("name", "source", "pipeline_id", "contact_id", "value_cents")
_CHANGES = "\n".join(
    f"""    IF NEW.{column} IS DISTINCT FROM OLD.{column} THEN
        v_changes := v_changes || jsonb_build_object(
            '{column}', jsonb_build_object('from', OLD.{column}, 'to', NEW.{column}));
    END IF;"""
    for column in UPDATED_COLUMNS
)

ISO = """to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')"""

LIFECYCLE_SQL = f"""
CREATE OR REPLACE FUNCTION deskcomm_lead_updated_emit() RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_changes jsonb := '{{}}'::jsonb;
BEGIN
    -- Closing, reopening and deleting are reported by their own events.
    IF NEW.status IS DISTINCT FROM OLD.status OR NEW.deleted_at IS DISTINCT FROM OLD.deleted_at THEN
        RETURN NEW;
    END IF;
{_CHANGES}
    IF v_changes <> '{{}}'::jsonb THEN
        PERFORM emit_event('lead.updated', 'lead', NEW.id,
                           jsonb_build_object('changes', v_changes),
                           {_metadata("lead_updated_emit")}, NEW.organization_id);
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER lead_updated_emit
    AFTER UPDATE ON deskcomm_lead
    FOR EACH ROW EXECUTE FUNCTION deskcomm_lead_updated_emit();

CREATE OR REPLACE FUNCTION deskcomm_lead_assigned_emit() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF NEW.owner_id IS DISTINCT FROM OLD.owner_id THEN
        PERFORM emit_event('lead.assigned', 'lead', NEW.id,
                           jsonb_build_object('from_owner_id', OLD.owner_id,
                                              'to_owner_id', NEW.owner_id),
                           {_metadata("lead_assigned_emit")}, NEW.organization_id);
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER lead_assigned_emit
    AFTER UPDATE OF owner_id ON deskcomm_lead
    FOR EACH ROW EXECUTE FUNCTION deskcomm_lead_assigned_emit();

CREATE OR REPLACE FUNCTION deskcomm_lead_deleted_emit() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL THEN
        PERFORM emit_event('lead.deleted', 'lead', NEW.id,
                           jsonb_build_object('soft', true, 'deleted_by', NEW.deleted_by),
                           {_metadata("lead_deleted_emit")}, NEW.organization_id);
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER lead_deleted_emit
    AFTER UPDATE OF deleted_at ON deskcomm_lead
    FOR EACH ROW EXECUTE FUNCTION deskcomm_lead_deleted_emit();

-- Lock an open, live lead of the organization, or raise: P0002 (no such lead), 55000 (closed).
CREATE OR REPLACE FUNCTION deskcomm_lead_lock_open(p_organization_id uuid, p_lead_id uuid)
RETURNS deskcomm_lead
LANGUAGE plpgsql
AS $$
DECLARE
    v_lead deskcomm_lead%ROWTYPE;
BEGIN
    SELECT * INTO v_lead FROM deskcomm_lead
     WHERE id = p_lead_id AND organization_id = p_organization_id AND deleted_at IS NULL
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no lead % in organization %', p_lead_id, p_organization_id
              USING ERRCODE = 'P0002';
    END IF;
    IF v_lead.status <> 'open' THEN
        RAISE EXCEPTION 'lead % is already %', p_lead_id, v_lead.status USING ERRCODE = '55000';
    END IF;
    RETURN v_lead;
END
$$;

CREATE OR REPLACE FUNCTION mark_lead_won(
    p_organization_id uuid, p_lead_id uuid, p_value_cents bigint DEFAULT NULL,
    p_reason text DEFAULT ''
) RETURNS uuid
LANGUAGE plpgsql
AS $$
DECLARE
    v_lead deskcomm_lead%ROWTYPE := deskcomm_lead_lock_open(p_organization_id, p_lead_id);
    v_value bigint := coalesce(p_value_cents, v_lead.value_cents);
BEGIN
    IF v_value IS NOT NULL AND v_value < 0 THEN
        RAISE EXCEPTION 'a won value must not be negative, got %', v_value USING ERRCODE = '22023';
    END IF;
    UPDATE deskcomm_lead
       SET status = 'won', won_at = now(), value_cents = v_value,
           close_reason = coalesce(p_reason, ''), updated_at = now()
     WHERE id = p_lead_id;
    RETURN emit_event('lead.won', 'lead', p_lead_id,
                      jsonb_build_object('value', v_value, 'value_cents', v_value,
                                         'won_at', {ISO},
                                         'reason', nullif(coalesce(p_reason, ''), '')),
                      {_metadata("mark_lead_won")}, p_organization_id);
END
$$;

CREATE OR REPLACE FUNCTION mark_lead_lost(
    p_organization_id uuid, p_lead_id uuid, p_reason text DEFAULT ''
) RETURNS uuid
LANGUAGE plpgsql
AS $$
DECLARE
    v_lead deskcomm_lead%ROWTYPE := deskcomm_lead_lock_open(p_organization_id, p_lead_id);
BEGIN
    UPDATE deskcomm_lead
       SET status = 'lost', lost_at = now(), close_reason = coalesce(p_reason, ''),
           updated_at = now()
     WHERE id = v_lead.id;
    RETURN emit_event('lead.lost', 'lead', p_lead_id,
                      jsonb_build_object('reason', coalesce(p_reason, ''), 'lost_at', {ISO}),
                      {_metadata("mark_lead_lost")}, p_organization_id);
END
$$;
"""

REVERSE_SQL = """
DROP FUNCTION IF EXISTS mark_lead_lost(uuid, uuid, text);
DROP FUNCTION IF EXISTS mark_lead_won(uuid, uuid, bigint, text);
DROP FUNCTION IF EXISTS deskcomm_lead_lock_open(uuid, uuid);
DROP TRIGGER IF EXISTS lead_deleted_emit ON deskcomm_lead;
DROP FUNCTION IF EXISTS deskcomm_lead_deleted_emit();
DROP TRIGGER IF EXISTS lead_assigned_emit ON deskcomm_lead;
DROP FUNCTION IF EXISTS deskcomm_lead_assigned_emit();
DROP TRIGGER IF EXISTS lead_updated_emit ON deskcomm_lead;
DROP FUNCTION IF EXISTS deskcomm_lead_updated_emit();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("eventbus", "0021_emit_event_any_conflict"),
        ("core", "0002_lead_stage_changed_trigger"),
        ("core", "0016_worker_process_control"),
        ("crm", "0008_order_placed_at"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="lead",
            name="close_reason",
            field=models.CharField(blank=True, default="", max_length=500),
        ),
        migrations.AddField(
            model_name="lead",
            name="deleted_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="lead",
            name="deleted_by",
            field=models.CharField(blank=True, default="", max_length=100),
        ),
        migrations.AddField(
            model_name="lead",
            name="lost_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="lead",
            name="owner",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="lead",
            name="status",
            field=models.TextField(
                choices=[("open", "Open"), ("won", "Won"), ("lost", "Lost")], default="open"
            ),
        ),
        migrations.AddField(
            model_name="lead",
            name="value_cents",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="lead",
            name="won_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="lead",
            index=models.Index(
                condition=models.Q(("deleted_at__isnull", True)),
                fields=["organization", "-created_at", "-id"],
                name="lead_org_live_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="leadactivity",
            index=models.Index(fields=["lead", "-created_at"], name="leadactivity_lead_idx"),
        ),
        migrations.RunSQL(LIFECYCLE_SQL, REVERSE_SQL),
    ]
