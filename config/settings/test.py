"""Test settings: real PostgreSQL and Redis, Qdrant Edge in a temporary folder, no LLM."""
import os
import tempfile
from pathlib import Path

from .base import *  # noqa: F401,F403
from .base import env

SECRET_KEY = "test-only-secret"
DEBUG = False
DATABASES = {"default": env.db("DATABASE_URL", default="postgres://postgres@127.0.0.1:5432/continuum")}
DATABASES["default"]["ATOMIC_REQUESTS"] = False
VAR_DIR = Path(tempfile.mkdtemp(prefix="continuum-test-"))
QDRANT_EDGE_PATH = VAR_DIR / "qdrant-edge"
QDRANT_URL = ""
REDIS_KEY_PREFIX = f"test{os.getpid()}"
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default="redis://127.0.0.1:6379/1")
LLM_BASE_URL = ""
LLM_API_KEY = ""
LLM_MODEL = ""
LLM_FAST_MODEL = ""
EMBEDDING_BACKEND = "local"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = False
CONTINUUM_EMBEDDED_WORKER = False
