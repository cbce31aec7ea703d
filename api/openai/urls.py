"""Routes of the OpenAI-compatible surface, mounted at /v1/ so chat frontends need only a base URL and a key."""
from django.urls import path

from . import views

urlpatterns = [
    path("chat/completions", views.chat_completions, name="openai-chat-completions"),
    path("responses", views.responses_create, name="openai-responses"),
    path("models", views.models, name="openai-models"),
    path("models/<path:model_id>", views.model_detail, name="openai-model"),
]
