-- name: isolated_due
-- Whether any of these consumers has a due delivery waiting to run alone (claim_isolated.sql).
-- A busy drain asks this about once a second before it stops claiming to run one: a probe of
-- delivery_isolated_idx, which holds only such rows (usually none).
SELECT EXISTS (
    SELECT 1 FROM eventbus_delivery d
     WHERE d.status = 'pending' AND d.isolate AND d.next_attempt_at <= %(now)s
       AND d.consumer = ANY(%(consumers)s::text[])
       AND NOT EXISTS (SELECT 1 FROM eventbus_consumer_state s  -- paused: left pending
                        WHERE s.consumer = d.consumer AND s.state <> 'running')
) AS due
