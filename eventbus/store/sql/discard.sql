-- name: discard
-- An operator's Discard: dead deliveries leave the DLQ for good (the audit trail says who and
-- why). They no longer count towards the event's fan-out, so the event can still become `done`.
WITH target AS (
    UPDATE eventbus_delivery d
       SET status = 'discarded', finished_at = %(now)s, updated_at = %(now)s
     WHERE d.id = ANY(%(ids)s::bigint[]) AND d.status = 'dead'
    RETURNING d.id, d.event_id, d.organization_id, d.consumer
), locked AS MATERIALIZED (
    SELECT e.id FROM event_log e
     WHERE e.id IN (SELECT event_id FROM target)
     ORDER BY e.id
       FOR UPDATE
), by_event AS (
    SELECT event_id, count(*) AS discarded FROM target GROUP BY event_id
), summary AS (
    UPDATE event_log e
       SET fanout = greatest(e.fanout - p.discarded, 0),
           status = CASE
               WHEN EXISTS (SELECT 1 FROM eventbus_delivery o
                             WHERE o.event_id = e.id AND o.status = 'dead'
                               AND o.id NOT IN (SELECT id FROM target)) THEN 'dead'
               WHEN cardinality(e.consumed_by) >= e.fanout - p.discarded THEN 'done'
               ELSE 'processing' END,
           updated_at = %(now)s
      FROM by_event p JOIN locked l ON l.id = p.event_id
     WHERE e.id = p.event_id
)
SELECT id, event_id, organization_id, consumer FROM target
