-- name: claim
-- Claim up to %(batch)s due deliveries of the named consumers, fairly across tenants.
--
-- List the organizations with pending work (a loose index scan over delivery_claim_idx,
-- starting at a random organization, %(start)s, so no tenant is always last), keep the
-- (organization, consumer) pairs that have due work (one index probe each: ORDER BY + LIMIT 1,
-- which EXISTS may turn into a scan), give each pair an equal share of the batch and take each
-- share in due order with FOR UPDATE SKIP LOCKED. The picked ids are materialised (one pass,
-- never more than the batch) and the UPDATE re-checks eligibility itself, so a row rescheduled
-- or claimed by another drain since the subquery's snapshot is never claimed twice.
--
-- Deliveries marked `isolate` (they were claimed together with others when a worker died) are
-- left to claim_isolated.sql, which runs each of them alone. The claim counts the attempt; the
-- reaper and the release give it back when the handler never ran.
--
-- Priority: each pair's share is taken highest priority first, then in due order (the claim
-- index leads with it), so an urgent event overtakes its consumer's backlog in the next claim;
-- shares stay equal per (organization, consumer), so one tenant's urgent flood never takes
-- another tenant's share.
--
-- This statement serves claims whose consumers are all unordered (eventbus.claim picks it):
-- their deliveries carry no key, and planning it costs half of claim_ordered.sql's, the one for
-- a claim that includes an ordered consumer. A keyed row can still meet it (a consumer declared
-- ordered=True once, unordered now): it is claimed only as its key's next (no earlier delivery
-- of the key pending, none running: one delivery_ordering_idx probe each), so the order holds;
-- the rows of busy keys are scanned past, which claim_ordered.sql avoids.
--
-- Paused consumers (eventbus_consumer_state not 'running': an operator's pause or an open
-- circuit breaker) are dropped from the list first, one primary-key probe per consumer named,
-- so their deliveries stay pending and uncharged; %(probing)s names the consumers whose
-- half-open probe this claim takes (eventbus/breaker.py), claimed despite their state.
WITH RECURSIVE runnable(consumer) AS MATERIALIZED (
    SELECT k.consumer FROM unnest(%(consumers)s::text[]) AS k(consumer)
     WHERE k.consumer = ANY(%(probing)s::text[])
        OR NOT EXISTS (SELECT 1 FROM eventbus_consumer_state s
                        WHERE s.consumer = k.consumer AND s.state <> 'running')
), after_start(org) AS (
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
), active AS MATERIALIZED (
    SELECT orgs.org, k.consumer
      FROM orgs
     CROSS JOIN runnable AS k
     CROSS JOIN LATERAL (
        SELECT 1 FROM eventbus_delivery d
         WHERE d.organization_id = orgs.org AND d.consumer = k.consumer
           AND d.status = 'pending' AND d.next_attempt_at <= %(now)s AND NOT d.isolate
           AND (d.ordering_key IS NULL OR NOT EXISTS (  -- ordered: this key's next, none running
                 SELECT 1 FROM eventbus_delivery o
                  WHERE o.consumer = d.consumer AND o.organization_id = d.organization_id
                    AND o.ordering_key = d.ordering_key AND o.ordering_key IS NOT NULL
                    AND o.status IN ('pending', 'processing')
                    AND (o.id < d.id OR o.status = 'processing')))
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
           AND d.status = 'pending' AND d.next_attempt_at <= %(now)s AND NOT d.isolate
           AND (d.ordering_key IS NULL OR NOT EXISTS (  -- ordered: this key's next, none running
                 SELECT 1 FROM eventbus_delivery o
                  WHERE o.consumer = d.consumer AND o.organization_id = d.organization_id
                    AND o.ordering_key = d.ordering_key AND o.ordering_key IS NOT NULL
                    AND o.status IN ('pending', 'processing')
                    AND (o.id < d.id OR o.status = 'processing')))
         ORDER BY d.priority DESC, d.next_attempt_at
         LIMIT (SELECT n FROM share)
           FOR UPDATE SKIP LOCKED
     ) c
     LIMIT %(batch)s
)
UPDATE eventbus_delivery d
   SET status = 'processing', attempts = d.attempts + 1, lease_token = %(token)s,
       locked_until = %(lease_until)s, locked_by = %(worker)s, updated_at = %(now)s
  FROM event_log e
 WHERE d.id = ANY(ARRAY(SELECT id FROM picked))
   AND d.status = 'pending' AND d.next_attempt_at <= %(now)s AND NOT d.isolate
   AND e.id = d.event_id
RETURNING d.id AS delivery_id, d.consumer, d.attempts AS attempt, d.max_attempts,
          d.redelivered, d.redelivery_reason, e.id AS event_id, e.organization_id,
          e.event_type, e.entity_kind, e.entity_id, e.payload, e.metadata, e.created_at,
          e.metadata ->> 'request_id' AS request_id, e.metadata ->> 'trace_id' AS trace_id,
          e.metadata ->> 'actor_id' AS actor_id
