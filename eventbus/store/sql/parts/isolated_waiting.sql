-- part: isolated_waiting, the WHERE clause of a delivery `d` that waits to run alone and may now
-- Due, marked `isolate`, of one of %(consumers)s, its consumer not paused (state 'running' or
-- no state row) and its key's turn (key_turn.sql). claim_isolated.sql claims such rows and
-- isolated_due.sql asks whether there is one: written once so the drain never stops claiming
-- to run one alone that the claim would not take. Served by delivery_isolated_idx (only
-- isolated pending rows are in it: usually none).
 WHERE d.status = 'pending' AND d.isolate AND d.next_attempt_at <= %(now)s
   AND d.consumer = ANY(%(consumers)s::text[])
   AND NOT EXISTS (SELECT 1 FROM eventbus_consumer_state s  -- paused: left pending
                    WHERE s.consumer = d.consumer AND s.state <> 'running')
   -- include: parts/key_turn.sql
