"""What the model reads of a session: its buffer in Redis, summary anchors, bridges, links and the composer."""
from django.apps import AppConfig


class ContextConfig(AppConfig):
    name = "context"
    verbose_name = "Context"
