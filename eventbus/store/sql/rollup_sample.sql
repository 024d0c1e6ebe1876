-- name: rollup_sample
-- Record, in this minute's rollup rows, each (organization, consumer) pair's lag: how long its
-- oldest due pending delivery has waited (0 when its pending work is all scheduled for later).
--
-- Run once a minute by the eventbus-rollup-sample job. The pairs with pending work are listed by
-- a loose index scan of delivery_claim_idx ((organization_id, consumer, next_attempt_at) WHERE
-- status = 'pending'): each step is one probe for the next pair after the last, and the pair's
-- first entry is its oldest due time. So a sample costs one probe per pair, whatever the backlog.
-- Rows are upserted in key order (as the settle statements do); a second sample in the same
-- minute keeps the worse lag.
WITH RECURSIVE pairs(org, consumer) AS (
    (SELECT organization_id, consumer FROM eventbus_delivery
      WHERE status = 'pending'
      ORDER BY organization_id, consumer LIMIT 1)
    UNION ALL
    SELECT n.organization_id, n.consumer
      FROM pairs p,
           LATERAL (SELECT d.organization_id, d.consumer FROM eventbus_delivery d
                     WHERE d.status = 'pending'
                       AND (d.organization_id, d.consumer) > (p.org, p.consumer)
                     ORDER BY d.organization_id, d.consumer LIMIT 1) n
), lag AS (
    SELECT p.org, p.consumer,
           greatest(extract(epoch FROM %(now)s::timestamptz - o.next_attempt_at), 0) AS seconds
      FROM pairs p,
           LATERAL (SELECT d.next_attempt_at FROM eventbus_delivery d
                     WHERE d.status = 'pending' AND d.organization_id = p.org
                       AND d.consumer = p.consumer
                     ORDER BY d.next_attempt_at LIMIT 1) o
), sampled AS (
    INSERT INTO eventbus_rollup AS r (bucket_start, consumer, organization_id, lag_seconds)
    SELECT date_trunc('minute', %(now)s::timestamptz, 'UTC'), consumer, org, seconds
      FROM lag ORDER BY consumer, org
        ON CONFLICT (bucket_start, consumer, organization_id, shard)
        DO UPDATE SET lag_seconds = greatest(r.lag_seconds, excluded.lag_seconds)
    RETURNING 1
)
SELECT count(*) AS pairs FROM sampled
