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
WITH RECURSIVE after_start(org) AS (
    (SELECT organization_id FROM eventbus_delivery
      WHERE status = 'pending' AND organization_id >= %(start)s
      ORDER BY organization_id LIMIT 1)
    UNION ALL
    SELECT (SELECT d.organization_id FROM eventbus_delivery d
             WHERE d.status = 'pending' AND d.organization_id > a.org
             ORDER BY d.organization_id LIMIT 1)
      FROM after_start a WHERE a.org IS NOT NULL
), before_start(org) AS (
    (SELECT organization_id FROM eventbus_delivery
      WHERE status = 'pending' AND organization_id < %(start)s
      ORDER BY organization_id LIMIT 1)
    UNION ALL
    SELECT (SELECT d.organization_id FROM eventbus_delivery d
             WHERE d.status = 'pending' AND d.organization_id > b.org
               AND d.organization_id < %(start)s
             ORDER BY d.organization_id LIMIT 1)
      FROM before_start b WHERE b.org IS NOT NULL
), orgs AS MATERIALIZED (
    SELECT org FROM (SELECT org FROM after_start WHERE org IS NOT NULL
                     UNION ALL
                     SELECT org FROM before_start WHERE org IS NOT NULL) o
     LIMIT %(batch)s
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
    SELECT greatest(1, ceil(%(batch)s::numeric / greatest(1, count(*))))::int AS n FROM active
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
UPDATE eventbus_delivery d
   SET status = 'processing', attempts = d.attempts + 1, lease_token = %(token)s,
       locked_until = %(lease_until)s, locked_by = %(worker)s, updated_at = %(now)s
  FROM event_log e
 WHERE d.id = ANY(ARRAY(SELECT id FROM picked))
   AND d.status = 'pending' AND d.next_attempt_at <= %(now)s
   AND e.id = d.event_id
RETURNING d.id AS delivery_id, d.consumer, d.attempts AS attempt, d.max_attempts,
          d.redelivered, d.redelivery_reason, e.id AS event_id, e.organization_id,
          e.event_type, e.entity_kind, e.entity_id, e.payload, e.metadata, e.created_at,
          e.metadata ->> 'request_id' AS request_id, e.metadata ->> 'trace_id' AS trace_id,
          e.metadata ->> 'actor_id' AS actor_id
