-- name: claim_isolated
-- Claim up to %(batch)s due deliveries marked `isolate`, oldest due first.
--
-- A delivery is marked `isolate` when its worker died (or lost its lease) while it was claimed
-- together with others: any of them may have killed the worker, so none is charged, and each
-- now runs alone. The drain claims them one at a time (%(batch)s = 1) and runs nothing else
-- meanwhile, so a handler that kills its worker again is the only delivery of that worker and
-- is charged for it (see reap.sql); the relay, which runs no handler, publishes them as usual.
-- Ordered consumers' deliveries wait for their key's turn as in claim.sql.
-- Served by delivery_isolated_idx (only isolated pending rows are in it: usually none).
WITH picked AS MATERIALIZED (
    SELECT d.id FROM eventbus_delivery d
     WHERE d.status = 'pending' AND d.isolate AND d.next_attempt_at <= %(now)s
       AND d.consumer = ANY(%(consumers)s::text[])
       AND NOT EXISTS (SELECT 1 FROM eventbus_consumer_state s  -- paused: left pending
                        WHERE s.consumer = d.consumer AND s.state <> 'running')
       AND (d.ordering_key IS NULL OR NOT EXISTS (  -- ordered: this key's next, none running
               SELECT 1 FROM eventbus_delivery o
                WHERE o.consumer = d.consumer AND o.organization_id = d.organization_id
                  AND o.ordering_key = d.ordering_key AND o.ordering_key IS NOT NULL
                  AND o.status IN ('pending', 'processing')
                  AND (o.id < d.id OR o.status = 'processing')))
     ORDER BY d.priority DESC, d.next_attempt_at
     LIMIT %(batch)s
       FOR UPDATE SKIP LOCKED
)
UPDATE eventbus_delivery d
   SET status = 'processing', attempts = d.attempts + 1, lease_token = %(token)s,
       locked_until = %(lease_until)s, locked_by = %(worker)s, updated_at = %(now)s
  FROM event_log e
 WHERE d.id = ANY(ARRAY(SELECT id FROM picked))
   AND d.status = 'pending' AND d.next_attempt_at <= %(now)s
   AND e.id = d.event_id
RETURNING d.id AS delivery_id, d.consumer, d.attempts AS attempt, d.max_attempts,
          d.redelivered, d.redelivery_reason, e.id AS event_id, e.organization_id,
          e.event_type, e.entity_kind, e.entity_id, e.payload, e.metadata, e.created_at,
          e.metadata ->> 'request_id' AS request_id, e.metadata ->> 'trace_id' AS trace_id,
          e.metadata ->> 'actor_id' AS actor_id
