"""System checks refuse a bad configuration loudly."""
import pytest
from django.core import checks

pytestmark = pytest.mark.django_db


def _ids(**kwargs):
    return {e.id for e in checks.run_checks(**kwargs)}


def test_a_good_configuration_passes(settings):
    assert not {i for i in _ids(databases=["default"]) if i.startswith("continuum.E")}


def test_local_embedder_with_wrong_dimension_is_an_error(settings):
    settings.EMBEDDING_DIM = 768
    assert "continuum.E002" in _ids()


def test_unknown_embedding_backend_is_an_error(settings):
    settings.EMBEDDING_BACKEND = "magic"
    assert "continuum.E001" in _ids()


def test_half_configured_llm_is_an_error(settings):
    settings.LLM_BASE_URL, settings.LLM_MODEL = "http://llm.local/v1", ""
    assert "continuum.E003" in _ids()


def test_unknown_memory_block_order_is_an_error(settings):
    settings.MEMORY_BLOCK_ORDER = "alphabetical"
    assert "continuum.E006" in _ids()


def test_visibility_timeout_shorter_than_task_limit_is_an_error(settings):
    settings.CELERY_VISIBILITY_TIMEOUT = 60
    assert "continuum.E004" in _ids()


def test_collection_of_another_size_is_an_error(settings):
    from infra.vector_store import get_vector_store

    get_vector_store()  # the collection exists with 384-d vectors
    settings.EMBEDDING_DIM = 512
    settings.EMBEDDING_BACKEND = "openai"  # a model of another size pointed at the same collection
    assert "continuum.E005" in _ids(databases=["default"])
