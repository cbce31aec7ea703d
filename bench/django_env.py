"""The Django a bench runs against: its own scratch database, var folder, Qdrant Edge folder and Redis key prefix,
migrated; and the JSON report a bench prints and may also write."""
from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Keys that would point the service at a model: a bench's figures must not depend on one unless it asks.
LLM_KEYS = ("LLM_BASE_URL", "LLM_MODEL", "LLM_FAST_MODEL", "LLM_API_KEY")
NO_LLM = {key: "" for key in LLM_KEYS}
# Measured as deployed: DEBUG's cursor wrapper records every query (what bench/load.py turns off too).
AS_DEPLOYED = {"TRANSFORMERS_OFFLINE": "1", "LOG_LEVEL": "WARNING", "DJANGO_DEBUG": "0"}


def bench_django_start(*, workdir: Path, database_url: str = "", env: dict[str, str] | None = None,
                       defaults: dict[str, str] | None = None) -> None:
    """Set up Django for a bench in workdir (the database defaults to SQLite there) and migrate. env is set over
    the process environment; defaults only where the environment does not say."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    os.environ["DATABASE_URL"] = database_url or f"sqlite:///{workdir / 'bench.sqlite3'}"
    os.environ["CONTINUUM_VAR_DIR"] = str(workdir)
    os.environ["QDRANT_EDGE_PATH"] = str(workdir / "edge")
    os.environ["REDIS_KEY_PREFIX"] = f"bench{uuid.uuid4().hex[:8]}"
    os.environ.update(env or {})
    for key, value in {"HF_HUB_OFFLINE": "1", **(defaults or {})}.items():
        os.environ.setdefault(key, value)
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def report_write(report, json_path: str | None, **dumps) -> None:
    """Write the report as JSON where --json asked for it."""
    if json_path:
        Path(json_path).write_text(json.dumps(report, indent=2, **dumps))
