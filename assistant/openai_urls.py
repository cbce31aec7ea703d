"""Routes of the OpenAI-compatible surface, mounted at /v1/ so chat frontends need only a base URL and a key."""
from django.urls import path

from . import openai_views

urlpatterns = [
    path("chat/completions", openai_views.chat_completions, name="openai-chat-completions"),
    path("responses", openai_views.responses_create, name="openai-responses"),
    path("models", openai_views.models, name="openai-models"),
    path("models/<path:model_id>", openai_views.model_detail, name="openai-model"),
]
