// The one-write task bench/soak.py runs on graphile-worker: the same autocommit
// INSERT ... ON CONFLICT DO UPDATE the event bus's soak consumers do (bench/soak_consumers.py),
// with the job's creation time and this run's start time, so the bench reads the pick-up lag
// and counts runs (a second run of one job makes runs = 2) the same way for both.
const UPSERT = `
INSERT INTO bench_soak_write (event_id, consumer, organization_id, created_at, started_at, runs)
VALUES ($1, $2, $3, $4, $5, 1)
ON CONFLICT (event_id, consumer) DO UPDATE SET runs = bench_soak_write.runs + 1`;

module.exports = async (payload, helpers) => {
  const started = new Date();
  await helpers.query(UPSERT, [
    payload.event_id,
    payload.consumer,
    payload.organization_id,
    helpers.job.created_at,
    started,
  ]);
};
