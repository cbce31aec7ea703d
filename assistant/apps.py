"""Assistant mode: the ReAct loop with memory tools and the OpenAI-compatible surface."""
from django.apps import AppConfig


class AssistantConfig(AppConfig):
    name = "assistant"
