"""The `emit_event(...)` SQL function (for triggers) and autovacuum tuning of the delivery table."""

from __future__ import annotations

from django.db import migrations

# Same contract as eventbus.emit: organization required, `{entity}.{action}` type, declared in the
# catalog mirror, required payload fields present; writes the event and one delivery per route in
# the caller's transaction; a repeated metadata.idempotency_key returns the existing event's id.
EMIT_EVENT_SQL = r"""
CREATE OR REPLACE FUNCTION emit_event(
    p_event_type      text,
    p_entity_kind     text,
    p_entity_id       uuid,
    p_payload         jsonb DEFAULT '{}'::jsonb,
    p_metadata        jsonb DEFAULT '{}'::jsonb,
    p_organization_id uuid  DEFAULT NULL
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
    v_fanout   int;
    v_existing uuid;
BEGIN
    IF p_organization_id IS NULL THEN
        RAISE EXCEPTION 'emit_event: organization is required (every event belongs to a tenant)'
              USING ERRCODE = '22023';
    END IF;
    IF p_event_type IS NULL OR p_event_type !~ '^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$' THEN
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

    SELECT count(*) INTO v_fanout FROM eventbus_route WHERE event_type = p_event_type;
    INSERT INTO event_log (id, organization_id, event_type, entity_kind, entity_id, payload,
                           metadata, consumed_by, attempts, status, fanout, idempotency_key,
                           created_at, updated_at)
    VALUES (v_event_id, p_organization_id, p_event_type, p_entity_kind, p_entity_id, v_payload,
            v_metadata || jsonb_build_object(
                'schema_version', v_schema.version,
                'emitted_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')),
            '{}', 0, CASE WHEN v_fanout > 0 THEN 'pending' ELSE 'done' END, v_fanout, v_key,
            now(), now())
    ON CONFLICT (organization_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING;
    IF NOT FOUND THEN
        SELECT id INTO v_existing FROM event_log
         WHERE organization_id = p_organization_id AND idempotency_key = v_key;
        RETURN v_existing;
    END IF;

    INSERT INTO eventbus_delivery (event_id, organization_id, consumer, status, attempts,
                                   max_attempts, next_attempt_at, created_at, updated_at)
    SELECT v_event_id, p_organization_id, r.consumer, 'pending', 0, r.max_attempts,
           now() + r.delay_seconds * interval '1 second', now(), now()
      FROM eventbus_route r
     WHERE r.event_type = p_event_type;

    IF v_schema.notify THEN
        PERFORM pg_notify('eventbus_wakeup', p_event_type);
    END IF;
    RETURN v_event_id;
END
$$;

COMMENT ON FUNCTION emit_event(text, text, uuid, jsonb, jsonb, uuid) IS
    'Emit an event from SQL (triggers): same validation and fan-out as eventbus.emit.';
"""

# Deliveries change status on every claim/ack: vacuum them early so dead tuples do not pile up
# in the claim index.
TUNE_SQL = """
ALTER TABLE eventbus_delivery SET (autovacuum_vacuum_scale_factor = 0.02,
                                   autovacuum_analyze_scale_factor = 0.02);
"""


class Migration(migrations.Migration):
    dependencies = [("eventbus", "0001_initial")]

    operations = [
        migrations.RunSQL(
            EMIT_EVENT_SQL, "DROP FUNCTION emit_event(text, text, uuid, jsonb, jsonb, uuid);"
        ),
        migrations.RunSQL(TUNE_SQL, migrations.RunSQL.noop),
    ]
