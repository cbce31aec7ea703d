"""Zero-setup local settings: SQLite, Qdrant Edge under ./var, Redis on localhost."""
from .base import *  # noqa: F401,F403
from .base import SECRET_KEY, env

DEBUG = env.bool("DJANGO_DEBUG", default=True)
SECRET_KEY = SECRET_KEY or "local-development-only-not-a-secret"
CONTINUUM_EMBEDDED_WORKER = env.bool("CONTINUUM_EMBEDDED_WORKER", default=True)
