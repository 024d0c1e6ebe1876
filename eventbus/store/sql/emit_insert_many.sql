-- emit_insert_many: up to EMIT_MANY_STATEMENT_ROWS events and their deliveries (emit_many).
--
-- Events from parallel arrays, in input order (so the first of two items with the same
-- idempotency key wins); routes per event from the registry's (type, consumer) arrays plus
-- eventbus_org_routes; each event's fanout counts its routes. The tenant is checked once, as in
-- emit_insert_one. The arrays are binary parameters (the `b` placeholders, through
-- deskcomm.db.pipeline): no quoting and escaping of every JSON text.
-- Priorities, ordering keys and the deliveries' event_created_at as in emit_insert_one
-- (`r_ordered` per registry route).
-- The deliveries are inserted in input order (ORDER BY the item's ordinal): an ordered
-- consumer runs a key's deliveries in delivery-id order, so the ids must follow the emit order
-- whatever join order the planner picks.
-- Rows: (id) of each inserted event (not of repeated keys); one (NULL) without a tenant.
WITH tenant AS MATERIALIZED (
    SELECT id FROM deskcomm_organization WHERE id = %(org)s FOR KEY SHARE
), i AS MATERIALIZED (
    SELECT * FROM unnest(%(ids)b::uuid[], %(event_types)b::text[], %(entity_kinds)b::text[],
                         %(entity_ids)b::uuid[], %(payloads)b::text[], %(metadatas)b::text[],
                         %(idempotency_keys)b::text[], %(ordering_keys)b::text[],
                         %(priorities)b::int2[]) WITH ORDINALITY
           AS i(id, event_type, entity_kind, entity_id, payload, metadata, idempotency_key,
                ordering_key, priority, ord)
), routes AS MATERIALIZED (
    SELECT i.id AS event_id, r.consumer, r.max_attempts, r.delay, r.ordered
      FROM i JOIN unnest(%(r_types)b::text[], %(r_consumers)b::text[], %(r_max)b::int[],
                         %(r_delays)b::float8[], %(r_ordered)b::bool[])
                  AS r(event_type, consumer, max_attempts, delay, ordered)
           ON r.event_type = i.event_type
    UNION ALL
    SELECT i.id, o.consumer, o.max_attempts, o.delay_seconds, false
      FROM i CROSS JOIN LATERAL eventbus_org_routes(%(org)s, i.event_type, i.payload::jsonb) o
), counts AS (
    SELECT event_id, count(*)::int AS n FROM routes GROUP BY event_id
), ev AS (
    INSERT INTO event_log (id, organization_id, event_type, entity_kind, entity_id, payload,
                           metadata, consumed_by, attempts, status, fanout, idempotency_key,
                           ordering_key, priority, created_at, updated_at)
    SELECT i.id, %(org)s, i.event_type, i.entity_kind, i.entity_id, i.payload::jsonb,
           i.metadata::jsonb, '{}', 0, CASE WHEN c.n > 0 THEN 'pending' ELSE 'done' END,
           coalesce(c.n, 0), i.idempotency_key, i.ordering_key, i.priority, %(now)s, %(now)s
      FROM i LEFT JOIN counts c ON c.event_id = i.id CROSS JOIN tenant
     ORDER BY i.ord
    -- No conflict target: unpartitioned, event_log_idempotency_uniq is the arbiter; partitioned
    -- (eventbus/history/partitions.py), a trigger claims the key in event_log_idempotency.
    ON CONFLICT DO NOTHING
    RETURNING id, event_type, ordering_key, priority
), deliveries AS (
    INSERT INTO eventbus_delivery (event_id, organization_id, consumer, event_type, status,
                                   attempts, max_attempts, next_attempt_at, ordering_key,
                                   priority, created_at, updated_at, event_created_at)
    SELECT ev.id, %(org)s, r.consumer, ev.event_type, 'pending', 0, r.max_attempts,
           %(now)s + r.delay * interval '1 second', CASE WHEN r.ordered THEN ev.ordering_key END,
           ev.priority, %(now)s, %(now)s, %(now)s
      FROM ev JOIN routes r ON r.event_id = ev.id JOIN i ON i.id = ev.id
     ORDER BY i.ord, r.consumer
)
SELECT id FROM ev
UNION ALL
SELECT NULL WHERE NOT EXISTS (SELECT FROM tenant)
