-- name: rollup_tenants
-- Per organization: settled volume over the ranking window (the last hour), failed attempts and
-- settled attempts over the recent window (fail ratio), the latest sampled lag, and the DLQ size,
-- for the per-tenant /metrics gauges (eventbus.history.rollup.tenant_figures).
--
-- The rollup arm is a range of its primary key; the DLQ arm is the DLQ's size per organization,
-- counted just before (sql/dlq_sizes.sql) and passed as two arrays. Names come from the
-- organizations table (the label is the slug).
WITH rolled AS (
    SELECT organization_id,
           sum(done + failed + dead) AS volume,
           sum(failed + dead) FILTER (WHERE bucket_start >= %(recent)s) AS failures,
           sum(done + failed + dead) FILTER (WHERE bucket_start >= %(recent)s) AS attempts,
           max(lag_seconds) FILTER (WHERE bucket_start >= %(lag_since)s) AS lag_seconds
      FROM eventbus_rollup
     WHERE bucket_start >= %(since)s
     GROUP BY organization_id
), dlq AS (
    SELECT * FROM unnest(%(dead_organizations)s::uuid[], %(dead)s::bigint[])
           AS q(organization_id, dead)
)
SELECT coalesce(r.organization_id, q.organization_id) AS organization_id,
       coalesce(o.slug, coalesce(r.organization_id, q.organization_id)::text) AS label,
       coalesce(r.volume, 0)::bigint AS volume, coalesce(r.failures, 0)::bigint AS failures,
       coalesce(r.attempts, 0)::bigint AS attempts, r.lag_seconds,
       coalesce(q.dead, 0)::bigint AS dead
  FROM rolled r
  FULL JOIN dlq q ON q.organization_id = r.organization_id
  LEFT JOIN deskcomm_organization o ON o.id = coalesce(r.organization_id, q.organization_id)
