"""Zero-setup local settings: SQLite, Qdrant Edge under ./var, Redis on localhost."""
from .base import *  # noqa: F401,F403
from .base import DATABASES, QDRANT_URL, SECRET_KEY, VAR_DIR, env

DEBUG = env.bool("DJANGO_DEBUG", default=True)
SECRET_KEY = SECRET_KEY or "local-development-only-not-a-secret"
# Embedded Qdrant Edge is one process's: run the worker inside it unless a Qdrant server is configured.
CONTINUUM_EMBEDDED_WORKER = env.bool("CONTINUUM_EMBEDDED_WORKER", default=not QDRANT_URL)
VAR_DIR.mkdir(parents=True, exist_ok=True)
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # The embedded worker writes from threads: wait for locks and let readers run beside a writer.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 30, "transaction_mode": "IMMEDIATE",
         "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"})
