"""The vector store: one interface over Qdrant (qdrant-client, QDRANT_URL) and Qdrant Edge (embedded)."""
from .base import Hit, MemoryPoint, Scope, ScopeMissing, VectorStore, point_id_for
from .registry import get_vector_store, reset_vector_store, set_vector_store

__all__ = ["Hit", "MemoryPoint", "Scope", "ScopeMissing", "VectorStore", "point_id_for", "get_vector_store",
           "reset_vector_store", "set_vector_store"]
