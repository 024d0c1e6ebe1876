"""Dispatch: how deliveries are claimed, run and settled.

The claim statements' callers (claim), the retry table, the slot pool and its leases (slots),
the runner (signals, LISTEN, heartbeats, reaping) and its pumps (the drain and the relay), the one
settlement path (settle), the circuit breaker, and the dead-letter alerts. Imports only the store.
"""
