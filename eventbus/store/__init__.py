"""The store: what the bus keeps and how things get in.

The tables (models), the named SQL statements (sql/), the vocabulary every other layer speaks (the
event-type catalog, `Event`, errors, settings, ids), the consumer registry and the routes it
mirrors into the database, and the emitter (`emit`, `emit_many`) with its tenancy and provenance
checks. Pauses live here too: a pause is state the emitter's wake-up and every claim read.
Imports nothing else of the bus: `dispatch`, `history` and `operations` build on it.
"""
