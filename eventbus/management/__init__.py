"""The bus's commands: drain_events, replay, archive, partitions and the other operators' tools."""
