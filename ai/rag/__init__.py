"""Retrieval-augmented generation: chunking, the indexer (pgvector) and retrieval."""
