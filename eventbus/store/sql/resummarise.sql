-- name: resummarise
-- Recompute replayed events' summary from their deliveries (a separate statement: a
-- data-modifying CTE's changes are invisible to its siblings). Event rows are locked in id
-- order first, like the ack.
WITH locked AS MATERIALIZED (
    SELECT id FROM event_log WHERE id = ANY(%(ids)s::uuid[]) ORDER BY id FOR UPDATE
)
UPDATE event_log e
   SET fanout = (SELECT count(*) FROM eventbus_delivery d
                  WHERE d.event_id = e.id AND d.status <> 'discarded'),
       consumed_by = ARRAY(SELECT d.consumer FROM eventbus_delivery d
                            WHERE d.event_id = e.id AND d.status = 'done' ORDER BY 1),
       status = CASE
           WHEN EXISTS (SELECT 1 FROM eventbus_delivery d
                         WHERE d.event_id = e.id AND d.status = 'dead') THEN 'dead'
           ELSE 'processing' END,
       updated_at = %(now)s
  FROM locked
 WHERE e.id = locked.id
