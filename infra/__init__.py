"""Adapters to the outside (Redis, LLM, embedder, tokenizer) and the application's error type."""
