"""The sessions' admin filter by user. The session's and the message's pages show the transcript, bridge and memories
drawn across apps: they are in backoffice/admin/sessions.py; import jobs are in orchestration/admin.py."""
from __future__ import annotations

from tenants.admin import user_filter

# A per-user list of sessions' rows, the user picked by name (the session admin's filter too).
SessionUserFilter = user_filter("user", ("chat_sessions", "session", "user"))
