"""Every admin page, registered here: Django's admin autodiscovery imports this package (backoffice is an installed
app), and each module registers the pages of the models it shows. Each model keeps its own URL
(/admin/<app label>/<model>/): the URL comes from the model's app, not from the module that registers it."""
from . import (  # noqa: F401  (each module registers its pages)
    api_keys,
    imports,
    memories,
    memory_logs,
    receipts,
    review,
    sessions,
    tenants,
    webhooks,
)
