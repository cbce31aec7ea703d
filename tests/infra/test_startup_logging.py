"""Start-up prints Continuum's own lines: libraries' routine notes stay below the log level.

Checked in a fresh process with the settings' own logging and the default LOG_LEVEL, so neither the environment the
suite runs in (a CI runner may set LOG_LEVEL) nor a test that reconfigures logging (Celery's test worker takes over
the root logger) decides the outcome."""
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIBRARY_NOTES = ["celery.beat", "celery.worker.consumer.connection", "mcp.server.streamable_http_manager",
                 "mcp.server.streamable_http"]
PROBE = """
import json, logging, django
django.setup()
names = json.loads(__import__("sys").argv[1])
print(json.dumps({n: [logging.getLogger(n).isEnabledFor(logging.INFO),
                      logging.getLogger(n).isEnabledFor(logging.WARNING)]
                  for n in names}))
"""


def _levels(names: list[str], **env_overrides) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "LOG_LEVEL"}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.test", **env_overrides)
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(names)], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_library_routine_notes_are_not_printed_at_info_and_continuums_own_lines_are():
    levels = _levels(LIBRARY_NOTES + ["config.embedded_worker", "infra.embedder"])
    for name in LIBRARY_NOTES:
        assert levels[name] == [False, True], name  # their warnings and errors still are
    assert levels["config.embedded_worker"] == [True, True]
    assert levels["infra.embedder"] == [True, True]


def test_log_level_quiets_continuums_own_lines_too():
    levels = _levels(["config.embedded_worker"], LOG_LEVEL="WARNING")
    assert levels["config.embedded_worker"] == [False, True]
