"""Retrieval of long-term memories for a turn, by step: query.py (what is searched for), ranking.py (candidates
found, fused and ranked), reads.py (the database reads on the hot path) and retrieve.py (the shortlist walked
under a token budget, with neighbouring turns and provenance). Import the entry points from the package."""

from .retrieve import RetrievedMemory, memory_retrieve, memory_retrieve_for_users, retrieved_kinds

__all__ = ["RetrievedMemory", "memory_retrieve", "memory_retrieve_for_users", "retrieved_kinds"]
