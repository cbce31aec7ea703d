"""What a failure means: a model's refusal is a 502 that no retry heals, an outage a retryable 503; a task retries
outages and gives up at once on refusals and bugs; the lifecycle jobs keep time on the one injectable clock."""
from __future__ import annotations

from datetime import datetime, timezone

import httpx
import pytest
import respx
from celery.exceptions import Retry

from infra import clock
from infra.errors import AppError, ServiceUnavailable, ValidationFailed
from infra.task_retry import RETRY_ON, RetryableFailure, retry_outages

BASE = "http://llm.invalid/v1"


@pytest.fixture
def llm(settings):
    from infra import llm

    settings.LLM_BASE_URL, settings.LLM_MODEL, settings.LLM_MAX_RETRIES = BASE, "m", 0
    llm._client.cache_clear()
    yield llm
    llm._client.cache_clear()


def _schema():
    return {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"], "additionalProperties": False}


def test_a_4xx_from_the_model_is_a_permanent_502(llm):
    with respx.mock() as router:
        router.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(400, json={"error": "no schemas"}))
        with pytest.raises(AppError) as caught:
            llm.structured_completion(system="s", user="u", schema_name="x", schema=_schema())
    assert caught.value.status == 502 and not caught.value.retryable
    assert not isinstance(caught.value, ServiceUnavailable)


def test_an_unreachable_model_is_a_retryable_503(llm):
    with respx.mock() as router:
        router.post(f"{BASE}/chat/completions").mock(side_effect=httpx.ConnectError("refused"))
        with pytest.raises(ServiceUnavailable) as caught:
            llm.structured_completion(system="s", user="u", schema_name="x", schema=_schema())
    assert caught.value.status == 503 and caught.value.retryable


def test_a_task_retries_an_outage_but_not_a_refusal_or_a_bug():
    @retry_outages
    def body(exc):
        raise exc

    with pytest.raises(RetryableFailure):
        body(ServiceUnavailable("down"))
    assert issubclass(RetryableFailure, RETRY_ON)
    for permanent in (ValidationFailed("bad"), AppError("refused", status=502, retryable=False),
                      ServiceUnavailable("not configured", retryable=False)):
        with pytest.raises(type(permanent)):
            body(permanent)
        assert not isinstance(permanent, RETRY_ON)
    with pytest.raises(KeyError):
        body(KeyError("a bug"))
    assert not issubclass(KeyError, RETRY_ON)


@pytest.mark.django_db
def test_the_extraction_task_fails_at_once_on_a_permanent_error(alice_session, monkeypatch):
    from orchestration import tasks
    from orchestration.messages import messages_append
    from sessions.services import NewMessage

    (msg,) = messages_append(tenant=alice_session.tenant, session_id=alice_session.pk, enqueue_extraction=False,
                             items=[NewMessage(role="user", content="I prefer aisle seats")])
    calls = []

    def refuse(**kw):
        calls.append(kw)
        raise ValidationFailed("never heals")

    monkeypatch.setattr(tasks, "message_extract", refuse)
    with pytest.raises(ValidationFailed):  # raised as it is, not turned into a Retry
        tasks.message_extract_task.apply(args=[str(msg.tenant_id), str(msg.pk)], throw=True)
    assert len(calls) == 1

    def outage(**kw):
        calls.append(kw)
        raise ServiceUnavailable("the model is down")

    monkeypatch.setattr(tasks, "message_extract", outage)
    with pytest.raises(Retry):
        tasks.message_extract_task.apply(args=[str(msg.tenant_id), str(msg.pk)], throw=True)


@pytest.mark.django_db
def test_job_runs_are_timed_by_the_injectable_clock(alice):
    from memory.lifecycle.runs import JobResult, job_run
    from memory.models import JobRun

    at = datetime(2031, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    clock.set_now(at)
    try:
        job_run(job="probe", tenant=alice, fn=lambda **kw: JobResult(stats={}))
    finally:
        clock.set_now(None)
    run = JobRun.objects.for_tenant(alice).get(job="probe")
    assert run.started_at == at and run.finished_at == at
