"""The orchestration layer owns a message's and a turn's fan-out across sessions, context and memory."""
from django.apps import AppConfig


class OrchestrationConfig(AppConfig):
    name = "orchestration"
    verbose_name = "Orchestration"
