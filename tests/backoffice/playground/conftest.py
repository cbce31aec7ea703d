"""Fixtures for the admin playground's tests: a scripted model that answers the turn and the extraction of its input,
the turn's background task run in the request, a staff user of Alice's, and the playground's URL."""
from __future__ import annotations

import json

import httpx
import pytest

from tests.assistant.scripted_llm import ScriptedLLM, _completion, llm_scripted

URL = "/admin/playground/"
SISTER = "My sister Priya lives in Lisbon."
SISTER_FACT = "The user's sister Priya lives in Lisbon."


class PlaygroundLLM(ScriptedLLM):
    """The scripted turn model, which also reads a message for memories as a model would: the sister's city is a
    stated fact."""

    def structured(self, body: dict) -> httpx.Response:
        if body["response_format"].get("json_schema", {}).get("name") != "message_memories":
            return super().structured(body)
        prompt = "\n".join(str(m.get("content") or "") for m in body["messages"])
        stated = [{"kind": "fact", "text": SISTER_FACT, "subject": "sister's city", "value": "Lisbon",
                   "confidence": 0.9}] if "Lisbon" in prompt else []
        return httpx.Response(200, json=_completion({"content": json.dumps({"stated": stated})}, self.model))


@pytest.fixture
def llm(settings):
    """A model configured at a fake base URL and answered by respx: `llm.add(reply, ...)` scripts the turn."""
    with llm_scripted(settings, PlaygroundLLM()) as scripted:
        yield scripted


@pytest.fixture
def eager(settings):
    """The turn's background task (extraction and the receipt) runs inside the request, as a worker would run it."""
    settings.CELERY_TASK_ALWAYS_EAGER = True


@pytest.fixture
def staff(django_user_model, alice):
    """A staff user on Alice's staff list, allowed to change sessions (what the playground asks for)."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("carol", password="carol-pass-1", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="change_session",
                                                     content_type__app_label="chat_sessions"))
    alice.staff_users.add(user)
    return user
