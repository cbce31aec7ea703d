"""Settings for the processes the fault tests start (Celery workers): the test settings, with the per-test Redis
prefix, broker and Qdrant Edge folder taken from the environment instead of fixed per process."""
import os
from pathlib import Path

from config.settings.test import *  # noqa: F401,F403

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
REDIS_KEY_PREFIX = os.environ["REDIS_KEY_PREFIX"]
QDRANT_EDGE_PATH = Path(os.environ["QDRANT_EDGE_PATH"])
QDRANT_URL = os.environ.get("QDRANT_URL", "")
