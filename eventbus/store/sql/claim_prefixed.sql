-- name: claim_prefixed
-- Claim up to %(batch)s due deliveries of the consumers named %(prefix)s..., fairly.
--
-- For consumers that are data (webhook subscriptions: "webhook:<uuid>"), whose names are not
-- known in advance. The organizations with pending work are listed as in claim.sql (a loose
-- index scan from a random start). Per organization, its consumers with pending rows are
-- listed by a loose scan over delivery_claim_idx's (organization_id, consumer) prefix (the cost
-- is the number of (organization, consumer) pairs with pending work, whatever the backlog);
-- those with the prefix are kept, each capped at its free in-flight slots (%(cap)s, or
-- %(busy_free)s for the consumers in %(busy)s that the worker already has in flight; 0 skips
-- them) so one slow consumer never holds more than its slots. Each pair with due work gets an
-- equal share, taken in due order with FOR UPDATE SKIP LOCKED; the UPDATE re-checks it.
--
-- Highest priority first within each pair, as in claim.sql (webhook subscriptions are never
-- ordered: their deliveries have no ordering key).
-- `isolate` is ignored here: these pumps run no handler code that could kill the worker.
-- Paused consumers (eventbus_consumer_state not 'running': a paused webhook subscription) are
-- skipped with one primary-key probe per pair, so their deliveries stay pending and uncharged.
-- Each `-- include: parts/<name>.sql` line is a piece shared with the other claims, written
-- once there and put in place on load (eventbus/store/sql/__init__.py); statement("claim_prefixed")
-- gives the whole statement as sent, to read or EXPLAIN.
WITH RECURSIVE after_start(org) AS (
    -- include: parts/after_start.sql
), before_start(org) AS (
    -- include: parts/before_start.sql
), orgs AS MATERIALIZED (
    -- include: parts/orgs.sql
), pairs(org, consumer) AS (
    SELECT o.org, (SELECT d.consumer FROM eventbus_delivery d
                    WHERE d.status = 'pending' AND d.organization_id = o.org
                    ORDER BY d.consumer LIMIT 1)
      FROM orgs o
    UNION ALL
    SELECT p.org, (SELECT d.consumer FROM eventbus_delivery d
                    WHERE d.status = 'pending' AND d.organization_id = p.org
                      AND d.consumer > p.consumer
                    ORDER BY d.consumer LIMIT 1)
      FROM pairs p WHERE p.consumer IS NOT NULL
), capped AS MATERIALIZED (
    SELECT p.org, p.consumer, coalesce(b.free, %(cap)s) AS cap
      FROM pairs p
      LEFT JOIN unnest(%(busy)s::text[], %(busy_free)s::int[]) AS b(consumer, free)
             ON b.consumer = p.consumer
     WHERE starts_with(p.consumer, %(prefix)s) AND coalesce(b.free, %(cap)s) > 0
       AND NOT EXISTS (SELECT 1 FROM eventbus_consumer_state s
                        WHERE s.consumer = p.consumer AND s.state <> 'running')
), active AS MATERIALIZED (
    SELECT capped.org, capped.consumer, capped.cap
      FROM capped
     CROSS JOIN LATERAL (
        SELECT 1 FROM eventbus_delivery d
         WHERE d.organization_id = capped.org AND d.consumer = capped.consumer
           AND d.status = 'pending' AND d.next_attempt_at <= %(now)s
         ORDER BY d.priority DESC, d.next_attempt_at
         LIMIT 1
     ) AS probe
), share AS MATERIALIZED (
    -- include: parts/share.sql
), picked AS MATERIALIZED (
    SELECT c.id
      FROM active
     CROSS JOIN LATERAL (
        SELECT d.id FROM eventbus_delivery d
         WHERE d.organization_id = active.org AND d.consumer = active.consumer
           AND d.status = 'pending' AND d.next_attempt_at <= %(now)s
         ORDER BY d.priority DESC, d.next_attempt_at
         LIMIT least((SELECT n FROM share), active.cap)
           FOR UPDATE SKIP LOCKED
     ) c
     LIMIT %(batch)s
)
-- include: parts/lease.sql
   AND d.status = 'pending' AND d.next_attempt_at <= %(now)s
   AND e.id = d.event_id
-- include: parts/claimed.sql
