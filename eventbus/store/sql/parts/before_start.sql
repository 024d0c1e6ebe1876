-- part: before_start, the body of the fair claims' recursive `before_start(org)` CTE
-- The wrap-round of after_start.sql: the organizations with pending work below %(start)s, by
-- the same loose index scan, stopping short of the start. Used by claim.sql,
-- claim_ordered.sql and claim_prefixed.sql (WITH RECURSIVE).
(SELECT organization_id FROM eventbus_delivery
  WHERE status = 'pending' AND organization_id < %(start)s
  ORDER BY organization_id LIMIT 1)
UNION ALL
SELECT (SELECT d.organization_id FROM eventbus_delivery d
         WHERE d.status = 'pending' AND d.organization_id > b.org
           AND d.organization_id < %(start)s
         ORDER BY d.organization_id LIMIT 1)
  FROM before_start b WHERE b.org IS NOT NULL
