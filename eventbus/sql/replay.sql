-- name: replay
-- Deliver events (again) to one consumer (restored archives, operator replays): a new pending
-- delivery, or the existing one back to pending when it is finished (done, dead, discarded);
-- running ones are left alone. Followed by resummarise.sql in the same transaction.
INSERT INTO eventbus_delivery (event_id, organization_id, consumer, event_type, status, attempts,
                               max_attempts, next_attempt_at, created_at, updated_at)
SELECT e.id, e.organization_id, %(consumer)s, e.event_type, 'pending', 0, %(max_attempts)s,
       %(now)s, %(now)s, %(now)s
  FROM event_log e
 WHERE e.id = ANY(%(ids)s::uuid[])
ON CONFLICT (event_id, consumer) DO UPDATE
   SET status = 'pending', attempts = 0, publish_failures = 0, next_attempt_at = %(now)s,
       last_error = NULL, error_class = NULL, locked_until = NULL, lease_token = NULL,
       locked_by = NULL, finished_at = NULL, isolate = false,
           redelivered = false, redelivery_reason = NULL, updated_at = %(now)s
 WHERE eventbus_delivery.status IN ('done', 'dead', 'discarded')
RETURNING id, event_id, organization_id, consumer
