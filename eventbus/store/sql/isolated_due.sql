-- name: isolated_due
-- Whether any of these consumers has a due delivery waiting to run alone (claim_isolated.sql).
-- A busy drain asks this about once a second before it stops claiming to run one: a probe of
-- delivery_isolated_idx, which holds only such rows (usually none). An ordered consumer's
-- delivery whose key is busy is not due yet (claim_isolated.sql would not take it).
-- Each `-- include: parts/<name>.sql` line is a piece shared with the other claims, written
-- once there and put in place on load (eventbus/store/sql/__init__.py); statement("isolated_due")
-- gives the whole statement as sent, to read or EXPLAIN.
SELECT EXISTS (
    SELECT 1 FROM eventbus_delivery d
    -- include: parts/isolated_waiting.sql
) AS due
