-- name: isolated_due
-- Whether any of these consumers has a due delivery waiting to run alone (claim_isolated.sql).
-- A busy drain asks this about once a second before it stops claiming to run one: a probe of
-- delivery_isolated_idx, which holds only such rows (usually none). An ordered consumer's
-- delivery whose key is busy is not due yet (claim_isolated.sql would not take it).
SELECT EXISTS (
    SELECT 1 FROM eventbus_delivery d
     WHERE d.status = 'pending' AND d.isolate AND d.next_attempt_at <= %(now)s
       AND d.consumer = ANY(%(consumers)s::text[])
       AND NOT EXISTS (SELECT 1 FROM eventbus_consumer_state s  -- paused: left pending
                        WHERE s.consumer = d.consumer AND s.state <> 'running')
       AND (d.ordering_key IS NULL OR NOT EXISTS (  -- ordered: this key's next, none running
               SELECT 1 FROM eventbus_delivery o
                WHERE o.consumer = d.consumer AND o.organization_id = d.organization_id
                  AND o.ordering_key = d.ordering_key AND o.ordering_key IS NOT NULL
                  AND o.status IN ('pending', 'processing')
                  AND (o.id < d.id OR o.status = 'processing')))
) AS due
