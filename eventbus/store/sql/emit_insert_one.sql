-- emit_insert_one: one event and its deliveries, in the caller's transaction (eventbus.emit).
--
-- One statement: the tenant check (event_log has no per-row foreign key: the organization row is
-- locked once, FOR KEY SHARE as such a check would, and a missing one writes nothing and returns
-- a NULL row), the routes (the registry's consumers, passed as array literals, plus the organization's
-- own from eventbus_org_routes, e.g. webhook subscriptions), the event with `fanout` = how many,
-- then one delivery per route. ON CONFLICT makes a repeated idempotency key a no-op (no row from
-- `ev`, so no deliveries and no wake-up either).
-- Each delivery carries its event's created_at (`event_created_at`: the partition key when the
-- tables are partitioned, eventbus/history/partitions.py). The event's `priority` goes to every delivery; its `ordering_key` to those of the consumers
-- declared ordered (`ordered`: one flag per registry route; the organization's routes, webhook
-- subscriptions, are unordered).
-- `notify`: high-priority events also wake idle workers on `channel`; PostgreSQL delivers the
-- NOTIFY when the caller commits, and never for a rolled-back emit.
-- The door's quota (an emit through the API or a pipeline, eventbus.store.emitter.Preparer): with a
-- %(door_key)s, the organization's EVENTBUS_DOOR_EMIT_RATE is counted in this statement (the GCRA
-- upsert of core/rate_limits.py on its UNLOGGED state table), not in a round trip of its own; a
-- refused emit writes nothing and counts nothing.
-- Rows: (id, fanout, woken) of the new event; none for a repeated key; NULLs without a tenant;
-- (NULL, -1, NULL) when the door's quota refused it.
WITH tenant AS MATERIALIZED (
    SELECT id FROM deskcomm_organization WHERE id = %(org)s FOR KEY SHARE
), door AS (
    INSERT INTO deskcomm_throttlestate AS t (key, tat)
    SELECT %(door_key)s::text, %(now)s + %(door_interval)s::interval
     WHERE %(door_key)s::text IS NOT NULL AND EXISTS (SELECT FROM tenant)
    ON CONFLICT (key) DO UPDATE
       SET tat = greatest(t.tat, %(now)s) + %(door_interval)s::interval
     WHERE greatest(t.tat, %(now)s) + %(door_interval)s::interval
           <= %(now)s + %(door_period)s::interval
    RETURNING tat
), routes AS MATERIALIZED (
    SELECT r.consumer, r.max_attempts, r.delay, r.ordered
      FROM unnest(%(consumers)s::text[], %(max_attempts)s::int[], %(delays)s::float8[],
                  %(ordered)s::bool[]) AS r(consumer, max_attempts, delay, ordered)
    UNION ALL
    SELECT o.consumer, o.max_attempts, o.delay_seconds, false
      FROM eventbus_org_routes(%(org)s, %(event_type)s, %(payload)s::jsonb) o
), ev AS (
    INSERT INTO event_log (id, organization_id, event_type, entity_kind, entity_id, payload,
                           metadata, consumed_by, attempts, status, fanout, idempotency_key,
                           ordering_key, priority, created_at, updated_at)
    SELECT %(id)s, %(org)s, %(event_type)s, %(entity_kind)s, %(entity_id)s, %(payload)s::jsonb,
           %(metadata)s::jsonb, '{}', 0, CASE WHEN c.n > 0 THEN 'pending' ELSE 'done' END, c.n,
           %(idempotency_key)s, %(ordering_key)s::text, %(priority)s::int2, %(now)s, %(now)s
      FROM (SELECT count(*)::int AS n FROM routes) c, tenant
     WHERE %(door_key)s::text IS NULL OR EXISTS (SELECT FROM door)
    -- No conflict target: unpartitioned, event_log_idempotency_uniq is the arbiter; partitioned
    -- (eventbus/history/partitions.py), a trigger claims the key in event_log_idempotency.
    ON CONFLICT DO NOTHING
    RETURNING id, fanout
), deliveries AS (
    INSERT INTO eventbus_delivery (event_id, organization_id, consumer, event_type, status,
                                   attempts, max_attempts, next_attempt_at, ordering_key,
                                   priority, created_at, updated_at, event_created_at)
    SELECT ev.id, %(org)s, r.consumer, %(event_type)s, 'pending', 0, r.max_attempts,
           %(now)s + r.delay * interval '1 second',
           CASE WHEN r.ordered THEN %(ordering_key)s::text END, %(priority)s::int2, %(now)s, %(now)s,
           %(now)s
      FROM ev, routes r
)
SELECT id, fanout,
       CASE WHEN %(notify)s::boolean THEN pg_notify(%(channel)s, %(event_type)s) END AS woken
  FROM ev
UNION ALL
SELECT NULL, NULL, NULL WHERE NOT EXISTS (SELECT FROM tenant)
UNION ALL
SELECT NULL, -1, NULL
 WHERE %(door_key)s::text IS NOT NULL AND EXISTS (SELECT FROM tenant)
   AND NOT EXISTS (SELECT FROM door)
