"""The production settings refuse to load with the operator endpoints open."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = {"DJANGO_SECRET_KEY": "s" * 50, "DATABASE_URL": "postgres://u@db.example:5432/c",
            "QDRANT_URL": "http://qdrant.example:6333", "DJANGO_ALLOWED_HOSTS": "api.example"}


def _load(**extra) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "METRICS_TOKEN"}
    env.update(REQUIRED, **extra)
    code = "import config.settings.production as s; print('loaded', bool(s.METRICS_TOKEN))"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)


def test_production_refuses_to_start_without_a_metrics_token():
    run = _load()
    assert run.returncode != 0 and "ImproperlyConfigured" in run.stderr and "METRICS_TOKEN" in run.stderr


def test_production_refuses_an_empty_or_short_metrics_token():
    for weak in ("", "short"):
        run = _load(METRICS_TOKEN=weak)
        assert run.returncode != 0 and "METRICS_TOKEN" in run.stderr, weak


def test_production_loads_with_a_metrics_token():
    run = _load(METRICS_TOKEN="a-long-operator-token-0123456789")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "loaded True"
