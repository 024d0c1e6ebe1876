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
-- This statement serves claims whose consumers are all unordered (eventbus.dispatch.claim picks it):
-- their deliveries carry no key, and planning it costs half of claim_ordered.sql's, the one for
-- a claim that includes an ordered consumer. A keyed row can still meet it (a consumer declared
-- ordered=True once, unordered now): it is claimed only as its key's next (no earlier delivery
-- of the key pending, none running: one delivery_ordering_idx probe each), so the order holds;
-- the rows of busy keys are scanned past, which claim_ordered.sql avoids.
--
-- Paused consumers (eventbus_consumer_state not 'running': an operator's pause or an open
-- circuit breaker) are dropped from the list first, one primary-key probe per consumer named,
-- so their deliveries stay pending and uncharged; %(probing)s names the consumers whose
-- half-open probe this claim takes (eventbus/dispatch/breaker.py), claimed despite their state.
--
-- Each `-- include: parts/<name>.sql` line is a piece shared with the other claims, written
-- once there and put in place on load (eventbus/store/sql/__init__.py); statement("claim")
-- gives the whole statement as sent, to read or EXPLAIN.
WITH RECURSIVE runnable(consumer) AS MATERIALIZED (
    -- include: parts/runnable.sql
), after_start(org) AS (
    -- include: parts/after_start.sql
), before_start(org) AS (
    -- include: parts/before_start.sql
), orgs AS MATERIALIZED (
    -- include: parts/orgs.sql
), active AS MATERIALIZED (
    SELECT orgs.org, k.consumer
      FROM orgs
     CROSS JOIN runnable AS k
     CROSS JOIN LATERAL (
        SELECT 1 FROM eventbus_delivery d
         WHERE d.organization_id = orgs.org AND d.consumer = k.consumer
           AND d.status = 'pending' AND d.next_attempt_at <= %(now)s AND NOT d.isolate
           -- include: parts/key_turn.sql
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
           AND d.status = 'pending' AND d.next_attempt_at <= %(now)s AND NOT d.isolate
           -- include: parts/key_turn.sql
         ORDER BY d.priority DESC, d.next_attempt_at
         LIMIT (SELECT n FROM share)
           FOR UPDATE SKIP LOCKED
     ) c
     LIMIT %(batch)s
)
-- include: parts/lease.sql
   AND d.status = 'pending' AND d.next_attempt_at <= %(now)s AND NOT d.isolate
   AND e.id = d.event_id
-- include: parts/claimed.sql
