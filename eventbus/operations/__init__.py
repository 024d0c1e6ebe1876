"""Operations: what operators, integrators and the schedules do with the bus.

Organization-scoped reads (selectors) and actions with their audit trail (services) that the
console and the API share, the status page's aggregates, the system checks, the scheduled jobs
and their runs as events, and the DLQ growth alert. The console (admin/), the API (api/) and the
commands (management/) sit above it.
"""
