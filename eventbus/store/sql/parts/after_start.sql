-- part: after_start, the body of the fair claims' recursive `after_start(org)` CTE
-- The organizations with pending work from %(start)s (a random organization, so no tenant is
-- always last) upwards: a loose index scan over delivery_claim_idx, which holds only pending
-- rows and leads with organization_id, so each step is one index probe for the next
-- organization up (ORDER BY + LIMIT 1) and the scan costs the number of organizations with
-- pending work, never the backlog. A NULL row ends it. before_start.sql wraps round; orgs.sql
-- joins the two. Used by claim.sql, claim_ordered.sql and claim_prefixed.sql (WITH RECURSIVE).
(SELECT organization_id FROM eventbus_delivery
  WHERE status = 'pending' AND organization_id >= %(start)s
  ORDER BY organization_id LIMIT 1)
UNION ALL
SELECT (SELECT d.organization_id FROM eventbus_delivery d
         WHERE d.status = 'pending' AND d.organization_id > a.org
         ORDER BY d.organization_id LIMIT 1)
  FROM after_start a WHERE a.org IS NOT NULL
