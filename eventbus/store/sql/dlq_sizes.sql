-- name: dlq_sizes
-- The dead-letter queue's size per (event type, consumer, organization): the status page, the
-- queue gauges of /metrics and the per-tenant gauges read it.
--
-- A loose index scan of delivery_dead_group_idx ((event_type, consumer, organization_id) WHERE
-- status = 'dead'): one probe finds each group after the previous one, then each group is
-- counted by an index-only range scan. Counting a big DLQ this way reads the index once and
-- never hashes or sorts its rows: at 332,775 dead letters (bench/scale.py, 10 M events) 41-56 ms
-- against 114-130 ms for GROUP BY over the same index (GroupAggregate) or 121 ms (HashAggregate).
-- Rows: (event_type, consumer, organization_id, dead), one per group with dead letters.
WITH RECURSIVE grp(event_type, consumer, organization_id) AS (
    (SELECT event_type, consumer, organization_id FROM eventbus_delivery
      WHERE status = 'dead'
      ORDER BY event_type, consumer, organization_id LIMIT 1)
    UNION ALL
    SELECT n.event_type, n.consumer, n.organization_id
      FROM grp g CROSS JOIN LATERAL (
        SELECT d.event_type, d.consumer, d.organization_id FROM eventbus_delivery d
         WHERE d.status = 'dead'
           AND (d.event_type, d.consumer, d.organization_id)
               > (g.event_type, g.consumer, g.organization_id)
         ORDER BY d.event_type, d.consumer, d.organization_id LIMIT 1
      ) n
)
SELECT g.event_type, g.consumer, g.organization_id, c.dead
  FROM grp g CROSS JOIN LATERAL (
    SELECT count(*) AS dead FROM eventbus_delivery d
     WHERE d.status = 'dead' AND d.event_type = g.event_type AND d.consumer = g.consumer
       AND d.organization_id = g.organization_id
  ) c
