-- name: reprocess
-- An operator's Reprocess: dead (or done) deliveries back to pending, attempts 0, due now, error
-- and redelivery marks cleared; only those consumers re-run. The events' summary forgets them
-- and leaves `dead` when no dead delivery remains. Event rows are locked in id order.
WITH target AS (
    UPDATE eventbus_delivery d
       SET status = 'pending', attempts = 0, publish_failures = 0, next_attempt_at = %(now)s,
           last_error = NULL, error_class = NULL, locked_until = NULL, lease_token = NULL,
           locked_by = NULL, finished_at = NULL, isolate = false,
           redelivered = false, redelivery_reason = NULL, updated_at = %(now)s
     WHERE d.id = ANY(%(ids)s::bigint[]) AND d.status IN ('dead', 'done')
    RETURNING d.id, d.event_id, d.organization_id, d.consumer
), locked AS MATERIALIZED (
    SELECT e.id FROM event_log e
     WHERE e.id IN (SELECT event_id FROM target)
     ORDER BY e.id
       FOR UPDATE
), by_event AS (
    SELECT event_id, array_agg(consumer) AS consumers FROM target GROUP BY event_id
), summary AS (
    UPDATE event_log e
       SET consumed_by = ARRAY(SELECT c FROM unnest(e.consumed_by) c
                                WHERE c <> ALL(p.consumers)),
           status = CASE
               WHEN EXISTS (SELECT 1 FROM eventbus_delivery o
                             WHERE o.event_id = e.id AND o.status = 'dead'
                               AND o.consumer <> ALL(p.consumers)) THEN 'dead'
               ELSE 'processing' END,
           updated_at = %(now)s
      FROM by_event p JOIN locked l ON l.id = p.event_id
     WHERE e.id = p.event_id
)
SELECT id, event_id, organization_id, consumer FROM target
