"""Webhooks: per-tenant endpoints and signed, retried deliveries of what changed."""
