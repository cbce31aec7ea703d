"""System checks that fail loudly on a bad configuration instead of at the first request."""
from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register


@register(Tags.compatibility, deploy=False)
def configuration_check(app_configs, **kwargs):
    errors = []
    if settings.EMBEDDING_BACKEND not in ("local", "openai"):
        errors.append(Error(f"EMBEDDING_BACKEND must be 'local' or 'openai', not {settings.EMBEDDING_BACKEND!r}.",
                            id="continuum.E001"))
    if settings.EMBEDDING_BACKEND == "local" and settings.EMBEDDING_DIM != 384:
        errors.append(Error("The local all-MiniLM-L6-v2 embedder gives 384 dimensions; EMBEDDING_DIM says "
                            f"{settings.EMBEDDING_DIM}.", id="continuum.E002"))
    if bool(settings.LLM_BASE_URL) != bool(settings.LLM_MODEL):
        errors.append(Error("LLM_BASE_URL and LLM_MODEL must be set together (or neither).", id="continuum.E003"))
    if settings.CELERY_VISIBILITY_TIMEOUT <= settings.CELERY_TASK_TIME_LIMIT:
        errors.append(Error("CELERY_VISIBILITY_TIMEOUT must exceed CELERY_TASK_TIME_LIMIT, or late-acked tasks "
                            "are redelivered while still running.", id="continuum.E004"))
    if settings.MEMORY_BLOCK_ORDER not in ("time", "relevance"):
        errors.append(Error(f"MEMORY_BLOCK_ORDER must be 'time' or 'relevance', not {settings.MEMORY_BLOCK_ORDER!r}.",
                            id="continuum.E006"))
    if not settings.QDRANT_URL and not settings.CONTINUUM_EMBEDDED_WORKER and not settings.CELERY_TASK_ALWAYS_EAGER:
        errors.append(Warning("Qdrant Edge (no QDRANT_URL) is locked to one process: run the Celery worker inside "
                              "the web process (CONTINUUM_EMBEDDED_WORKER=1) or point QDRANT_URL at a server.",
                              id="continuum.W001"))
    return errors


@register(Tags.database)
def collection_dimension_check(app_configs, **kwargs):
    """The existing collection's vector size must match the embedder's (checked only when asked: --database)."""
    if not kwargs.get("databases"):
        return []
    try:
        from infra.vector_store import get_vector_store

        size = get_vector_store().dense_size()
    except Exception as exc:
        return [Warning(f"Could not inspect the vector collection: {exc}", id="continuum.W002")]
    if size is not None and size != settings.EMBEDDING_DIM:
        return [Error(f"The vector collection holds {size}-d vectors but the embedder makes "
                      f"{settings.EMBEDDING_DIM}-d; reindex into a new collection.", id="continuum.E005")]
    return []
