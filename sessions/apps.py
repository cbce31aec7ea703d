"""Chat sessions, their messages, summary anchors, bridge summaries and links (app label chat_sessions)."""
from django.apps import AppConfig


class ChatSessionsConfig(AppConfig):
    name = "sessions"
    # Django's contrib app already owns the label "sessions".
    label = "chat_sessions"
    verbose_name = "Chat sessions"
    default_auto_field = "django.db.models.BigAutoField"
