"""Start-up prints Continuum's own lines: libraries' routine notes stay below the log level."""
import logging

import pytest


@pytest.mark.parametrize("name", ["celery.beat", "celery.worker.consumer.connection",
                                  "mcp.server.streamable_http_manager", "mcp.server.streamable_http"])
def test_library_routine_notes_are_not_printed_at_info(name):
    logger = logging.getLogger(name)
    assert not logger.isEnabledFor(logging.INFO)
    assert logger.isEnabledFor(logging.WARNING)  # their warnings and errors still are


def test_continuums_own_start_up_lines_still_are():
    assert logging.getLogger("config.embedded_worker").isEnabledFor(logging.INFO)
