"""Lifecycle jobs over long-term memory: merge, decay, expire, forget, consolidate, compact buffers, reconcile."""
