-- name: ack
-- Mark deliveries done (fenced by the claim's lease token), then fold their consumers into the
-- events' summary.
--
-- The summary UPDATE locks each event row itself and, under READ COMMITTED, re-reads the
-- latest version of a row another worker's ack changed meanwhile, so no consumer is lost. Its
-- input is materialised in event id order, so two acks of overlapping events lock their rows in
-- the same order (no separate SELECT ... FOR UPDATE pass: that wrote every row twice). Should a
-- plan ever visit them in another order, PostgreSQL detects the deadlock, and the worker keeps
-- the results and settles them again (the fenced statements are safe to repeat). The update
-- touches no indexed column: it stays on the page (HOT, see the fillfactor in migration 0011).
-- `consumed_by` stays sorted and distinct; with one consumer (the usual case) that needs no
-- sort. Returns how many were still this claim's (a count: no row per delivery to decode).
WITH acked AS (
    UPDATE eventbus_delivery d
       SET status = 'done', locked_until = NULL, lease_token = NULL, last_error = NULL,
           error_class = NULL, updated_at = %(now)s, finished_at = %(now)s
     WHERE d.id = ANY(%(ids)b::bigint[]) AND d.lease_token = %(token)s
       AND d.status = 'processing'
    RETURNING d.id, d.event_id, d.consumer, d.organization_id
), by_event AS MATERIALIZED (
    SELECT event_id, array_agg(consumer) AS consumers FROM acked GROUP BY event_id
     ORDER BY event_id
), summary AS (
    UPDATE event_log e
       SET consumed_by = CASE
               WHEN cardinality(e.consumed_by) + cardinality(p.consumers) <= 1  -- the usual case
               THEN e.consumed_by || p.consumers
               ELSE ARRAY(SELECT DISTINCT c FROM unnest(e.consumed_by || p.consumers) c
                           ORDER BY c) END,
           status = CASE
               WHEN e.status = 'dead' THEN 'dead'
               WHEN (CASE WHEN cardinality(e.consumed_by) + cardinality(p.consumers) <= 1
                          THEN cardinality(e.consumed_by) + cardinality(p.consumers)
                          ELSE cardinality(ARRAY(SELECT DISTINCT unnest(e.consumed_by
                                                                        || p.consumers)))
                     END) >= e.fanout THEN 'done'
               ELSE 'processing' END,
           updated_at = %(now)s
      FROM by_event p
     WHERE e.id = p.event_id
), rollup AS (
    -- The per-minute rollup gets one upsert of the rows this statement changed, so a lost lease
    -- counts nothing and a repeated ack (after a deadlock or a dropped connection) counts once.
    -- Each connection writes rows of its own (shard = its backend pid), so concurrent acks
    -- never wait on each other's rollup rows; rows are still locked in key order.
    -- (Said here, not in the header: pg_stat_activity keeps the first 1 kB of a statement.)
    INSERT INTO eventbus_rollup AS r (bucket_start, consumer, organization_id, shard, done)
    SELECT date_trunc('minute', %(now)s::timestamptz, 'UTC'), consumer, organization_id,
           pg_backend_pid(), count(*)
      FROM acked GROUP BY consumer, organization_id ORDER BY consumer, organization_id
        ON CONFLICT (bucket_start, consumer, organization_id, shard)
        DO UPDATE SET done = r.done + excluded.done
)
SELECT count(*) AS acked FROM acked
