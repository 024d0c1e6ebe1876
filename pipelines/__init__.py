"""Seed 004's pipeline engine: per-organization pipelines (nodes and edges as data) run on
`order.pre` (in the order request), `order.post` (order-post-worker) and `event.<Type>`
(pipeline-event-worker), with one execution per (pipeline, event) and one row per step."""
