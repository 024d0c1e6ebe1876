"""Ordering keys and priorities (issue #17).

Events and deliveries get `ordering_key` and `priority`; the claim index leads with the priority
within each (organization, consumer), and `delivery_ordering_idx` answers the ordered consumers'
"is an earlier delivery of this key unfinished?" (only keyed, unfinished rows are in it). Both
new columns have constant defaults, so adding them rewrites no row.

`emit_event()` gains two optional parameters (p_ordering_key, p_priority). Adding parameters
makes a new function, and a 6-argument call would then match both: the old one is dropped
first. A frozen copy of eventbus/store/sql/emit_event.sql as of this migration.
"""

from importlib import import_module
from typing import Any

from django.db import migrations, models

PREVIOUS_EMIT_EVENT_SQL: str = import_module(
    "eventbus.migrations.0012_event_tenant_check"
).EMIT_EVENT_SQL
OLD_SIGNATURE = "emit_event(text, text, uuid, jsonb, jsonb, uuid)"
NEW_SIGNATURE = "emit_event(text, text, uuid, jsonb, jsonb, uuid, text, int)"
EMIT_EVENT_SQL = """CREATE OR REPLACE FUNCTION emit_event(
    p_event_type      text,
    p_entity_kind     text,
    p_entity_id       uuid,
    p_payload         jsonb DEFAULT '{}'::jsonb,
    p_metadata        jsonb DEFAULT '{}'::jsonb,
    p_organization_id uuid  DEFAULT NULL,
    p_ordering_key    text  DEFAULT NULL,
    p_priority        int   DEFAULT NULL
) RETURNS uuid
LANGUAGE plpgsql
AS $$
DECLARE
    v_event_id uuid := gen_random_uuid();
    v_payload  jsonb := coalesce(p_payload, '{}'::jsonb);
    v_metadata jsonb := coalesce(p_metadata, '{}'::jsonb);
    v_key      text := v_metadata ->> 'idempotency_key';
    v_schema   eventbus_eventtypeschema%ROWTYPE;
    v_missing  text[];
    v_inserted int;  -- events inserted (0, or 1)
    v_existing uuid;
    v_order    text;
    v_priority smallint;
BEGIN
    IF p_organization_id IS NULL THEN
        RAISE EXCEPTION 'emit_event: organization is required (every event belongs to a tenant)'
              USING ERRCODE = '22023';
    END IF;
    -- The tenant must exist, and cannot be deleted before this transaction ends.
    PERFORM 1 FROM deskcomm_organization WHERE id = p_organization_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'emit_event: organization % does not exist', p_organization_id
              USING ERRCODE = '23503';
    END IF;
    IF p_event_type IS NULL OR p_event_type !~ '^[a-z][a-z0-9_]*\\.[a-z][a-z0-9_]*$' THEN
        RAISE EXCEPTION 'emit_event: invalid event type %: expected {entity}.{action} in lower snake case',
              quote_nullable(p_event_type) USING ERRCODE = '22023';
    END IF;
    IF p_entity_kind IS NULL OR btrim(p_entity_kind) = '' THEN
        RAISE EXCEPTION 'emit_event: entity_kind is required' USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(v_payload) <> 'object' OR jsonb_typeof(v_metadata) <> 'object' THEN
        RAISE EXCEPTION 'emit_event: payload and metadata must be JSON objects' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO v_schema FROM eventbus_eventtypeschema WHERE name = p_event_type;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'emit_event: unknown event type % (not in the catalog)', p_event_type
              USING ERRCODE = '22023';
    END IF;
    SELECT array_agg(f) INTO v_missing FROM unnest(v_schema.required) AS f WHERE NOT v_payload ? f;
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION 'emit_event: % v% payload is missing required field(s): %',
              p_event_type, v_schema.version, array_to_string(v_missing, ', ')
              USING ERRCODE = '22023';
    END IF;
    IF p_priority IS NOT NULL AND p_priority NOT BETWEEN -10 AND 10 THEN
        RAISE EXCEPTION 'emit_event: priority must be an integer from -10 to 10, got %', p_priority
              USING ERRCODE = '22023';
    END IF;
    v_priority := coalesce(p_priority, v_schema.priority);
    v_order := left(coalesce(
        nullif(p_ordering_key, ''),
        CASE WHEN jsonb_typeof(v_payload -> v_schema.ordered_by) IN ('string', 'number')
             THEN v_payload ->> v_schema.ordered_by END,
        CASE WHEN p_entity_kind || '_id' = v_schema.ordered_by THEN p_entity_id::text END
    ), 255);

    -- One statement (one snapshot): the routes are counted into `fanout` and turned into
    -- deliveries from the same rows, even while subscriptions change concurrently.
    WITH routes AS MATERIALIZED (
        SELECT r.consumer, r.max_attempts, r.delay_seconds, r.ordered
          FROM eventbus_route r WHERE r.event_type = p_event_type
        UNION ALL
        SELECT o.consumer, o.max_attempts, o.delay_seconds, false
          FROM eventbus_org_routes(p_organization_id, p_event_type, v_payload) o
    ), ev AS (
        INSERT INTO event_log (id, organization_id, event_type, entity_kind, entity_id, payload,
                               metadata, consumed_by, attempts, status, fanout, idempotency_key,
                               ordering_key, priority, created_at, updated_at)
        SELECT v_event_id, p_organization_id, p_event_type, p_entity_kind, p_entity_id, v_payload,
               v_metadata || jsonb_build_object(
                   'schema_version', v_schema.version,
                   'emitted_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')),
               '{}', 0, CASE WHEN c.n > 0 THEN 'pending' ELSE 'done' END, c.n, v_key, v_order,
               v_priority, now(), now()
          FROM (SELECT count(*)::int AS n FROM routes) c
        ON CONFLICT (organization_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING id
    ), deliveries AS (
        INSERT INTO eventbus_delivery (event_id, organization_id, consumer, event_type, status,
                                       attempts, max_attempts, next_attempt_at, ordering_key,
                                       priority, created_at, updated_at)
        SELECT ev.id, p_organization_id, r.consumer, p_event_type, 'pending', 0, r.max_attempts,
               now() + r.delay_seconds * interval '1 second',
               CASE WHEN r.ordered THEN v_order END, v_priority, now(), now()
          FROM ev, routes r
    )
    SELECT count(*) INTO v_inserted FROM ev;
    IF v_inserted = 0 THEN  -- the idempotency key was already used: return that event
        SELECT id INTO v_existing FROM event_log
         WHERE organization_id = p_organization_id AND idempotency_key = v_key;
        RETURN v_existing;
    END IF;

    IF v_schema.notify THEN
        PERFORM pg_notify('eventbus_wakeup', p_event_type);
    END IF;
    RETURN v_event_id;
END
$$;
"""


def forward(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"DROP FUNCTION IF EXISTS {OLD_SIGNATURE}")
        cursor.execute(EMIT_EVENT_SQL)


def backward(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"DROP FUNCTION IF EXISTS {NEW_SIGNATURE}")
        cursor.execute(PREVIOUS_EMIT_EVENT_SQL)


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0011_worker_registry"),
        ("eventbus", "0019_delivery_replay_id"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="delivery",
            name="delivery_claim_idx",
        ),
        migrations.AddField(
            model_name="delivery",
            name="ordering_key",
            field=models.TextField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="delivery",
            name="priority",
            field=models.SmallIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="eventlog",
            name="ordering_key",
            field=models.TextField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="eventlog",
            name="priority",
            field=models.SmallIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="eventtypeschema",
            name="ordered_by",
            field=models.TextField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="eventtypeschema",
            name="priority",
            field=models.SmallIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="route",
            name="ordered",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(
                condition=models.Q(("status", "pending")),
                fields=["organization", "consumer", "-priority", "next_attempt_at"],
                name="delivery_claim_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(
                condition=models.Q(
                    ("ordering_key__isnull", False), ("status__in", ["pending", "processing"])
                ),
                fields=["consumer", "organization", "ordering_key", "id"],
                name="delivery_ordering_idx",
            ),
        ),
        migrations.RunPython(forward, backward),
    ]
