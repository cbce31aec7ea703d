"""Registers the admin pages that read across apps. Each model keeps its own URL (/admin/<app label>/<model>/): the
URL comes from the model's app, not from the module that registers it."""
from . import memories, review, sessions, tenants  # noqa: F401  (each module registers its pages)
