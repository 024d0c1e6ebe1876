-- part: lease, the head of every claim's UPDATE: the rows picked take the lease
-- Each claim statement ends in this UPDATE of its materialised `picked` ids: processing under
-- the claim's %(token)s (which fences every later transition of the row) until
-- %(lease_until)s, held by %(worker)s, the attempt counted (the reaper and the release give it
-- back when the handler never ran). ANY(ARRAY(...)) makes the ids one index condition. The
-- statement adds its own re-check of eligibility (a row rescheduled or claimed by another
-- drain since the pick's snapshot is not claimed twice) and `AND e.id = d.event_id`, then
-- returns claimed.sql's columns.
UPDATE eventbus_delivery d
   SET status = 'processing', attempts = d.attempts + 1, lease_token = %(token)s,
       locked_until = %(lease_until)s, locked_by = %(worker)s, updated_at = %(now)s
  FROM event_log e
 WHERE d.id = ANY(ARRAY(SELECT id FROM picked))
