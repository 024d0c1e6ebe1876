-- part: orgs, the body of the fair claims' `orgs` CTE
-- The organizations a claim serves, in scan order from the random start: after_start, then
-- before_start, at most %(batch)s of them (each share is at least one row, so a batch has no
-- room for more). The statements materialise it: the pairs
-- and the share are built on it. Used by claim.sql, claim_ordered.sql and claim_prefixed.sql.
SELECT org FROM (SELECT org FROM after_start WHERE org IS NOT NULL
                 UNION ALL
                 SELECT org FROM before_start WHERE org IS NOT NULL) o
 LIMIT %(batch)s
