-- part: share, the body of the fair claims' `share` CTE
-- Each (organization, consumer) pair with due work, the rows of `active`, gets an equal share
-- of the batch: ceil(%(batch)s / pairs), at least 1, so one tenant or one consumer never takes
-- another's (more pairs than the batch: the picks are cut to the batch after). One rule for
-- claim.sql, claim_ordered.sql and claim_prefixed.sql: the fairness is the same on every pump.
SELECT greatest(1, ceil(%(batch)s::numeric / greatest(1, count(*))))::int AS n FROM active
