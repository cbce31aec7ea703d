"""Routes of the OpenAI-compatible surface, mounted at /v1/ so chat frontends need only a base URL and a key."""
from django.urls import path

from . import openai_views

urlpatterns = [
    path("chat/completions", openai_views.chat_completions, name="openai-chat-completions"),
    path("models", openai_views.models, name="openai-models"),
]
