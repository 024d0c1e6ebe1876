"""History: what the bus does with the log once it has been delivered.

Partitions of the event log and their upgrade, the archive to files (and its rewrite), replay of
a consumer over a time window, and the per-minute rollup of outcomes with the DLQ's sizes.
Imports the store and the dispatch (an archive or a replay moves deliveries through
`dispatch.claim`).
"""
