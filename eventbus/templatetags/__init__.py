"""Template tags of the operations console (the index's groups, the status and DLQ pages)."""
