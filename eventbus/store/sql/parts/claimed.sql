-- part: claimed, the RETURNING list of every claim: one row per delivery claimed
-- The delivery's lease facts and its event (joined by lease.sql's `FROM event_log e`), read
-- by column name in eventbus/dispatch/claim.py (eventbus.store.event.row_loader makes the Event). A claim
-- that needs more (claim_ordered.sql: the ordering key) adds its columns after this part.
RETURNING d.id AS delivery_id, d.consumer, d.attempts AS attempt, d.max_attempts,
          d.redelivered, d.redelivery_reason, e.id AS event_id, e.organization_id,
          e.event_type, e.entity_kind, e.entity_id, e.payload, e.metadata, e.created_at,
          e.metadata ->> 'request_id' AS request_id, e.metadata ->> 'trace_id' AS trace_id,
          e.metadata ->> 'actor_id' AS actor_id
