-- name: claim_ordered
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
-- Ordering keys: a delivery of a consumer declared ordered=True carries its event's key and is
-- claimable only when it is its key's head (no earlier delivery of the key still pending, i.e.
-- waiting or retrying) and none of the key's is running. Pairs without keyed work take the plain
-- scan above. A pair with keyed work (one delivery_ordering_idx probe says so) takes its share
-- from two bounded candidate lists, never a scan of its whole backlog (a deep backlog of a few
-- busy conversations made that O(backlog) per claim):
--   * the window: the pair's first share / 4 due rows in claim order (priority, then due time),
--     each kept if it has no key or heads an idle key (two index probes: an earlier pending or
--     running delivery of the key in delivery_ordering_idx, a running one in
--     delivery_ordering_busy_idx); urgent and oldest work is taken from here;
--   * the walk: up to `share` distinct keys with work, a loose index scan over
--     delivery_ordering_idx starting at a random key (%(key_start)s, wrapping round), each
--     key's head kept when it is due, not waiting to run alone and its key idle; a key deep
--     in the backlog is reached even when the window holds only a busy key's rows.
-- The candidates are ordered by priority then due time, cut to the share and locked with SKIP
-- LOCKED, re-checking the row as the UPDATE does. With %(per_key)s above 1 (the drain pump),
-- a locked head brings the deliveries right after it in its key, while they are due and not
-- waiting to run alone, up to the batch's room spread evenly over the heads: a run of the key,
-- which the worker runs in id order on one lane and stops at the first that fails (the rest
-- are released, uncharged). No other claimer can take a row of a run: in any snapshot the head
-- is pending before them, and a pending row changes only by a claim. Within one snapshot a key has at most one
-- head, and SKIP LOCKED plus the re-check give it to one claimer; a dead letter (dead, or
-- discarded) releases its key. An ordered consumer's events without a key (types it is not
-- keyed by) are taken from the window: behind a deep backlog of busy keys they wait until
-- they reach it.
--
-- Paused consumers (eventbus_consumer_state not 'running': an operator's pause or an open
-- circuit breaker) are dropped from the list first, one primary-key probe per consumer named,
-- so their deliveries stay pending and uncharged; %(probing)s names the consumers whose
-- half-open probe this claim takes (eventbus/dispatch/breaker.py), claimed despite their state.
--
-- Each `-- include: parts/<name>.sql` line is a piece shared with the other claims, written
-- once there and put in place on load (eventbus/store/sql/__init__.py); statement("claim_ordered")
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
    SELECT orgs.org, k.consumer, kind.keyed
      FROM orgs
     CROSS JOIN runnable AS k
     CROSS JOIN LATERAL (
        SELECT 1 FROM eventbus_delivery d
         WHERE d.organization_id = orgs.org AND d.consumer = k.consumer
           AND d.status = 'pending' AND d.next_attempt_at <= %(now)s AND NOT d.isolate
         ORDER BY d.priority DESC, d.next_attempt_at
         LIMIT 1
     ) AS probe
     CROSS JOIN LATERAL (  -- whether the pair has keyed work: the ordered path below
        SELECT EXISTS (SELECT 1 FROM eventbus_delivery o
                        WHERE o.consumer = k.consumer AND o.organization_id = orgs.org
                          AND o.ordering_key IS NOT NULL
                          AND o.status IN ('pending', 'processing')) AS keyed
     ) AS kind
), share AS MATERIALIZED (
    -- include: parts/share.sql
), picked_plain AS MATERIALIZED (
    SELECT c.id
      FROM active
     CROSS JOIN LATERAL (
        SELECT d.id FROM eventbus_delivery d
         WHERE d.organization_id = active.org AND d.consumer = active.consumer
           AND d.status = 'pending' AND d.next_attempt_at <= %(now)s AND NOT d.isolate
           AND d.ordering_key IS NULL
         ORDER BY d.priority DESC, d.next_attempt_at
         LIMIT (SELECT n FROM share)
           FOR UPDATE SKIP LOCKED
     ) c
     WHERE NOT active.keyed
     LIMIT %(batch)s
), keys(org, consumer, k, pass) AS (  -- the walk: distinct keys from the random start, wrapping
    SELECT active.org, active.consumer, coalesce(first.k, least.k),
           CASE WHEN first.k IS NULL THEN 2 ELSE 1 END
      FROM active
      LEFT JOIN LATERAL (
        SELECT o.ordering_key AS k FROM eventbus_delivery o
         WHERE o.consumer = active.consumer AND o.organization_id = active.org
           AND o.ordering_key IS NOT NULL AND o.status IN ('pending', 'processing')
           AND o.ordering_key >= %(key_start)s
         ORDER BY o.ordering_key LIMIT 1
      ) AS first ON true
      LEFT JOIN LATERAL (
        SELECT o.ordering_key AS k FROM eventbus_delivery o
         WHERE o.consumer = active.consumer AND o.organization_id = active.org
           AND o.ordering_key IS NOT NULL AND o.status IN ('pending', 'processing')
         ORDER BY o.ordering_key LIMIT 1
      ) AS least ON first.k IS NULL
     WHERE active.keyed
    UNION ALL
    SELECT keys.org, keys.consumer, coalesce(after.k, wrapped.k),
           CASE WHEN after.k IS NULL THEN 2 ELSE keys.pass END
      FROM keys
      LEFT JOIN LATERAL (  -- the next key up
        SELECT o.ordering_key AS k FROM eventbus_delivery o
         WHERE o.consumer = keys.consumer AND o.organization_id = keys.org
           AND o.ordering_key IS NOT NULL AND o.status IN ('pending', 'processing')
           AND o.ordering_key > keys.k
         ORDER BY o.ordering_key LIMIT 1
      ) AS after ON true
      LEFT JOIN LATERAL (  -- past the last key, round to the first (once)
        SELECT o.ordering_key AS k FROM eventbus_delivery o
         WHERE o.consumer = keys.consumer AND o.organization_id = keys.org
           AND o.ordering_key IS NOT NULL AND o.status IN ('pending', 'processing')
         ORDER BY o.ordering_key LIMIT 1
      ) AS wrapped ON after.k IS NULL AND keys.pass = 1
     WHERE keys.k IS NOT NULL AND coalesce(after.k, wrapped.k) IS NOT NULL
       -- the second pass stops short of the start (where the first began)
       AND (after.k IS NOT NULL AND keys.pass = 1 OR coalesce(after.k, wrapped.k) < %(key_start)s)
), walked AS MATERIALIZED (
    SELECT org, consumer, k FROM keys WHERE k IS NOT NULL
     LIMIT (SELECT n FROM share) * (SELECT count(*) FROM active WHERE keyed)
), candidates AS MATERIALIZED (
    SELECT h.id, h.priority, h.next_attempt_at
      FROM walked
     CROSS JOIN LATERAL (  -- the key's head: its lowest pending or running delivery
        SELECT o.id, o.status, o.priority, o.next_attempt_at, o.isolate
          FROM eventbus_delivery o
         WHERE o.consumer = walked.consumer AND o.organization_id = walked.org
           AND o.ordering_key = walked.k AND o.ordering_key IS NOT NULL
           AND o.status IN ('pending', 'processing')
         ORDER BY o.id LIMIT 1
     ) AS h
     WHERE h.status = 'pending' AND h.next_attempt_at <= %(now)s AND NOT h.isolate
       AND NOT EXISTS (SELECT 1 FROM eventbus_delivery b
                        WHERE b.consumer = walked.consumer AND b.organization_id = walked.org
                          AND b.ordering_key = walked.k AND b.ordering_key IS NOT NULL
                          AND b.status = 'processing')
    UNION
    SELECT w.id, w.priority, w.next_attempt_at
      FROM active
     CROSS JOIN LATERAL (
        SELECT d.id, d.ordering_key, d.priority, d.next_attempt_at FROM eventbus_delivery d
         WHERE d.organization_id = active.org AND d.consumer = active.consumer
           AND d.status = 'pending' AND d.next_attempt_at <= %(now)s AND NOT d.isolate
         ORDER BY d.priority DESC, d.next_attempt_at
         LIMIT greatest(1, (SELECT n FROM share) / 4)
     ) AS w
     WHERE active.keyed
       AND (w.ordering_key IS NULL OR (
            NOT EXISTS (SELECT 1 FROM eventbus_delivery o  -- an earlier one of its key waits
                         WHERE o.consumer = active.consumer AND o.organization_id = active.org
                           AND o.ordering_key = w.ordering_key AND o.ordering_key IS NOT NULL
                           AND o.status IN ('pending', 'processing') AND o.id < w.id)
            AND NOT EXISTS (SELECT 1 FROM eventbus_delivery b  -- one of its key runs
                             WHERE b.consumer = active.consumer AND b.organization_id = active.org
                               AND b.ordering_key = w.ordering_key AND b.ordering_key IS NOT NULL
                               AND b.status = 'processing')))
), picked_keyed AS MATERIALIZED (
    SELECT d.id, d.consumer, d.organization_id, d.ordering_key FROM eventbus_delivery d
     WHERE d.id = ANY(ARRAY(SELECT id FROM candidates
                             ORDER BY priority DESC, next_attempt_at
                             LIMIT greatest(0, %(batch)s - (SELECT count(*) FROM picked_plain))))
       AND d.status = 'pending' AND d.next_attempt_at <= %(now)s AND NOT d.isolate
       FOR UPDATE SKIP LOCKED
), room AS MATERIALIZED (  -- what is left of the batch, and how deep each locked head's run goes
    SELECT r.left_over, least(%(per_key)s - 1, ceil(r.left_over::numeric / greatest(1, r.heads)))::int AS depth
      FROM (SELECT %(batch)s - (SELECT count(*) FROM picked_plain)
                   - (SELECT count(*) FROM picked_keyed) AS left_over,
                   (SELECT count(*) FROM picked_keyed WHERE ordering_key IS NOT NULL) AS heads) r
), runs AS MATERIALIZED (  -- each locked head's key: the deliveries right after it, while due
    SELECT s.id, s.pos
      FROM picked_keyed h
     CROSS JOIN LATERAL (
        SELECT n.id, row_number() OVER (ORDER BY n.id) AS pos,
               bool_and(n.ok) OVER (ORDER BY n.id) AS unbroken
          FROM (SELECT o.id, o.status = 'pending' AND o.next_attempt_at <= %(now)s
                             AND NOT o.isolate AS ok
                  FROM eventbus_delivery o
                 WHERE o.consumer = h.consumer AND o.organization_id = h.organization_id
                   AND o.ordering_key = h.ordering_key AND o.ordering_key IS NOT NULL
                   AND o.status IN ('pending', 'processing') AND o.id > h.id
                 ORDER BY o.id
                 LIMIT (SELECT depth FROM room)) AS n
     ) AS s
     WHERE h.ordering_key IS NOT NULL AND s.unbroken AND (SELECT depth FROM room) > 0
), picked AS MATERIALIZED (
    SELECT id FROM picked_plain
    UNION ALL
    SELECT id FROM picked_keyed
    UNION ALL
    (SELECT id FROM runs ORDER BY pos, id LIMIT greatest(0, (SELECT left_over FROM room)))
)
-- include: parts/lease.sql
   AND d.status = 'pending' AND d.next_attempt_at <= %(now)s AND NOT d.isolate
   AND e.id = d.event_id
-- include: parts/claimed.sql
          , d.ordering_key
