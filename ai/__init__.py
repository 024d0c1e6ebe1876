"""The AI workers: the model gateway, the responder, sentiment, budgets and the RAG indexer."""
