-- name: retry_now
-- An operator's Retry now: deliveries waiting to retry after a failure (pending, with the error
-- of their last attempt) become due at once. Attempts, error and history are kept, so a further
-- failure backs off as the retry table says. Deliveries not waiting (running, done, dead,
-- discarded, or due already) are left alone and not returned. Served by the primary key; the
-- event's summary is not touched (its `next_attempt_at` only says when a retry was scheduled).
UPDATE eventbus_delivery
   SET next_attempt_at = %(now)s, updated_at = %(now)s
 WHERE id = ANY(%(ids)s::bigint[]) AND status = 'pending' AND last_error IS NOT NULL
   AND next_attempt_at > %(now)s
RETURNING id, event_id, organization_id, consumer
