-- name: adopt
-- The jobs process takes over a delivery the relay claimed and published.
--
-- Still leased with the token the broker message carries: the lease is renewed for the run and
-- the delivery's event returned. 0 rows means the lease was lost (expired and reaped, or the
-- delivery was reprocessed): the message is stale and nothing runs. `held_back` says the
-- consumer was paused (or its breaker opened) after the relay published it: the caller gives it
-- back uncharged instead of running it (a half-open probe runs).
UPDATE eventbus_delivery d
   SET locked_until = %(lease_until)s, locked_by = %(worker)s, updated_at = %(now)s
  FROM event_log e
 WHERE d.id = %(id)s AND d.lease_token = %(token)s AND d.status = 'processing'
   AND e.id = d.event_id
RETURNING d.id AS delivery_id, d.consumer, d.attempts AS attempt, d.max_attempts,
          d.redelivered, d.redelivery_reason, e.id AS event_id, e.organization_id,
          e.event_type, e.entity_kind, e.entity_id, e.payload, e.metadata, e.created_at,
          e.metadata ->> 'request_id' AS request_id, e.metadata ->> 'trace_id' AS trace_id,
          e.metadata ->> 'actor_id' AS actor_id,
          EXISTS (SELECT 1 FROM eventbus_consumer_state s
                   WHERE s.consumer = d.consumer AND s.state IN ('paused', 'open')) AS held_back
