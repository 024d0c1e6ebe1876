-- part: runnable, the body of the claims' `runnable(consumer)` CTE (claim.sql, claim_ordered.sql)
-- The consumers named in %(consumers)s that may be claimed now: those whose row in
-- eventbus_consumer_state is 'running' or absent, one primary-key probe each, so a paused
-- consumer (an operator's pause, an open circuit breaker) keeps its deliveries pending and
-- uncharged; plus those in %(probing)s, whose half-open probe the caller took
-- (eventbus/dispatch/breaker.py), claimed despite their state. The statements materialise it: it is
-- read once per organization. (claim_prefixed.sql checks the state per pair instead: its
-- consumers are not named in advance.)
SELECT k.consumer FROM unnest(%(consumers)s::text[]) AS k(consumer)
 WHERE k.consumer = ANY(%(probing)s::text[])
    OR NOT EXISTS (SELECT 1 FROM eventbus_consumer_state s
                    WHERE s.consumer = k.consumer AND s.state <> 'running')
