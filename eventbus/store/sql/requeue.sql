-- name: requeue
-- Reaped deliveries that are not charged: pending again at once with the claimed attempt
-- refunded, marked `redelivered` with the reason (their handler may have run: handlers check
-- their idempotency key, operators see side effects at risk) and `isolate` as asked (each then
-- runs alone). Fenced by the reaper's token.
UPDATE eventbus_delivery
   SET status = 'pending', attempts = greatest(attempts - 1, 0), next_attempt_at = %(now)s,
       locked_until = NULL, lease_token = NULL, locked_by = NULL, isolate = %(isolate)s,
       redelivered = redelivered OR %(redelivered)s,
       redelivery_reason = CASE WHEN %(redelivered)s THEN %(reason)s ELSE redelivery_reason END,
       updated_at = %(now)s
 WHERE id = ANY(%(ids)s::bigint[]) AND lease_token = %(token)s AND status = 'processing'
RETURNING id
