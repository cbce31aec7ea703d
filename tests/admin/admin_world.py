"""A tenant holding a row of every model the admin registers (and the inlines of each page), for tests that walk
every admin page, and a reader of an admin form that posts back what a browser would."""
from __future__ import annotations

import html
import json
import uuid
from datetime import timedelta
from html.parser import HTMLParser

from infra import clock


def admin_world(tenant, user) -> dict:
    """Sessions with anchors, links, a bridge and tool calls; memories (active, held, superseded) with history;
    a receipt with items; an import job; webhook endpoint, delivery and attempt; a job run, an outbox row and a
    tenant erasure record. The tenant keeps the API key its fixture made."""
    from context.models import BridgeSummary, SessionLink, SummaryAnchor
    from memory.actions import memory_create, memory_supersede
    from memory.models import JobRun
    from memory.sources import SourceMessage
    from orchestration.messages import messages_append
    from orchestration.models import ImportJob
    from orchestration.receipts import receipt_write
    from orchestration.sessions import session_close, session_open
    from sessions.services import NewMessage
    from tenants.models import TenantErasure
    from webhooks.models import WebhookAttempt, WebhookDelivery
    from webhooks.services import webhook_endpoint_create

    earlier, _ = session_open(tenant=tenant, user=user, title="Flights to Boston")
    msgs = messages_append(tenant=tenant, session_id=earlier.pk, enqueue_extraction=False, items=[
        NewMessage(role="user", content="I avoid United and my destination is Boston."),
        NewMessage(role="assistant", content="", tool_calls=[{"id": "c1", "type": "function", "function": {
            "name": "recall", "arguments": json.dumps({"query": "airline"})}}]),
        NewMessage(role="tool", tool_call_id="c1", name="recall", content=json.dumps({"memories": []})),
        NewMessage(role="assistant", content="Noted: Boston, not on United.")])
    SummaryAnchor.objects.unscoped().create(tenant=tenant, session=earlier, first_seq=1, last_seq=4,
                                            text="turns 1-4: Boston, not United")
    session_close(tenant=tenant, session_id=earlier.pk, finish=False)
    BridgeSummary.objects.unscoped().create(tenant=tenant, session=earlier, text="Planned a flight to Boston.")
    later, _ = session_open(tenant=tenant, user=user, title="Hotel")
    SessionLink.objects.unscoped().get_or_create(tenant=tenant, from_session=later, to_session=earlier,
                                                 kind="same_user")

    def source(m):
        return SourceMessage(id=str(m.pk), session_id=m.session_id, created_at=m.created_at)

    avoids = memory_create(tenant=tenant, user=user, kind="preference", text="Dana avoids United.",
                           source=source(msgs[0]), subject="likes: united", value="negative")
    jfk = memory_create(tenant=tenant, user=user, kind="fact", text="Dana's destination is JFK.",
                        source=source(msgs[0]), subject="destination", value="JFK")
    boston = memory_create(tenant=tenant, user=user, kind="fact", text="Dana's destination is Boston.",
                           source=source(msgs[0]), subject="destination", value="Boston")
    memory_supersede(old=jfk, new=boston, actor_type="system")
    tenant.review_inferred = True  # an inferred memory is held for review
    tenant.save(update_fields=["review_inferred"])
    held = memory_create(tenant=tenant, user=user, kind="preference", text="Dana probably likes window seats.",
                         source_type="inferred", confidence=0.5, source=source(msgs[0]))

    receipt = receipt_write(payload={
        "id": str(uuid.uuid4()), "tenant_id": str(tenant.pk), "user_id": str(user.pk), "session_id": str(later.pk),
        "surface": "context", "created_at": clock.now().isoformat(), "query": "Where am I flying?", "budget": 800,
        "total_tokens": 120, "breakdown": {"system": 40, "profile": 20, "memories": 30, "recent": 30},
        "memory_status": "ok", "items": [
            {"memory_id": str(boston.pk), "included": True, "reason": "", "section": "memories", "rank": 1,
             "kind": "fact", "text": boston.text, "score": 0.8123456789012345,
             "score_parts": {"relevance": 0.61234567890123, "recency": 0.2000000001}, "tokens": 9,
             "source_message_ids": [str(msgs[0].pk)]},
            {"memory_id": str(jfk.pk), "included": False, "reason": "budget", "section": "memories", "rank": 2,
             "kind": "fact", "text": jfk.text, "score": 0.4, "score_parts": {"relevance": 0.4}, "tokens": 9,
             "source_message_ids": [str(msgs[0].pk)]},
            {"memory_id": str(avoids.pk), "included": True, "reason": "", "section": "profile", "rank": 1,
             "kind": "preference", "text": avoids.text, "score": 0.0, "score_parts": {}, "tokens": 6,
             "source_message_ids": [str(msgs[0].pk)]}]})
    ImportJob.objects.unscoped().create(tenant=tenant, user=user, format="openai", file_name="export.json",
                                        status="done", sessions_total=1, messages_total=4, position=4)
    endpoint, _ = webhook_endpoint_create(tenant=tenant, url="https://hooks.example.com/continuum",
                                          description="crm")
    delivery = WebhookDelivery.objects.unscoped().create(tenant=tenant, endpoint=endpoint,
                                                         event_type="memory.created", body="{}", attempts=1)
    WebhookAttempt.objects.unscoped().create(tenant=tenant, delivery=delivery, number=1, started_at=clock.now(),
                                             status_code=500, outcome="retryable", error="server error")
    JobRun.objects.create(job="merge", tenant=tenant, finished_at=clock.now() + timedelta(seconds=1),
                          status="done", stats={"merged": 0})
    TenantErasure.objects.create(tenant_id_value=uuid.uuid4(), slug="gone-tenant", state="done")
    _beat_schedules()
    return {"earlier": earlier, "later": later, "messages": msgs, "avoids": avoids, "jfk": jfk, "boston": boston,
            "held": held, "receipt": receipt, "endpoint": endpoint, "delivery": delivery}


def _beat_schedules() -> None:
    """The beat scheduler's own admin pages (registered by django_celery_beat)."""
    from django_celery_beat.models import (
        ClockedSchedule,
        CrontabSchedule,
        IntervalSchedule,
        PeriodicTask,
        SolarSchedule,
    )

    every = IntervalSchedule.objects.create(every=10, period=IntervalSchedule.MINUTES)
    CrontabSchedule.objects.create(minute="5", hour="3")
    SolarSchedule.objects.create(event="sunrise", latitude=51.05, longitude=3.72)
    ClockedSchedule.objects.create(clocked_time=clock.now() + timedelta(days=1))
    PeriodicTask.objects.create(name="merge near-duplicates", task="memory.tasks.memories_merge_task",
                                interval=every)


class FormReader(HTMLParser):
    """The fields of one form (by id) as a browser submits them: text and hidden inputs, checked boxes and radios,
    each select's chosen options (the first when none is marked), textareas' text."""

    def __init__(self, form_id: str):
        super().__init__(convert_charrefs=True)
        self.form_id = form_id
        self.inside = False
        self.data: list[tuple[str, str]] = []
        self.text_fields: list[tuple[str, str]] = []  # (name, type) of editable text inputs and textareas, in order
        self._select: dict | None = None
        self._textarea: dict | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and a.get("id") == self.form_id:
            self.inside = True
            return
        if not self.inside:
            return
        name = a.get("name")
        if tag == "input" and name and "disabled" not in a:
            kind = (a.get("type") or "text").lower()
            if kind in ("submit", "button", "image", "file", "reset"):
                return
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    self.data.append((name, a.get("value", "on")))
                return
            self.data.append((name, a.get("value", "")))
            if kind in ("text", "number", "email", "url") and "readonly" not in a:
                self.text_fields.append((name, kind))
        elif tag == "select" and name and "disabled" not in a:
            self._select = {"name": name, "multiple": "multiple" in a, "chosen": [], "first": None}
        elif tag == "option" and self._select is not None:
            value = a.get("value", "")
            if self._select["first"] is None:
                self._select["first"] = value
            if "selected" in a:
                self._select["chosen"].append(value)
        elif tag == "textarea" and name and "disabled" not in a:
            self._textarea = {"name": name, "text": "", "readonly": "readonly" in a}

    def handle_data(self, data):
        if self._textarea is not None:
            self._textarea["text"] += data

    def handle_endtag(self, tag):
        if tag == "form" and self.inside:
            self.inside = False
        elif tag == "select" and self._select is not None:
            s = self._select
            chosen = s["chosen"] or ([] if s["multiple"] or s["first"] is None else [s["first"]])
            self.data += [(s["name"], v) for v in chosen]
            self._select = None
        elif tag == "textarea" and self._textarea is not None:
            t = self._textarea
            text = t["text"][1:] if t["text"].startswith("\n") else t["text"]  # the parser keeps what browsers drop
            self.data.append((t["name"], html.unescape(text)))
            if not t["readonly"]:
                self.text_fields.append((t["name"], "textarea"))
            self._textarea = None


def form_of(page: str, form_id: str) -> FormReader:
    reader = FormReader(form_id)
    reader.feed(page)
    return reader


def post_data(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in pairs:
        out.setdefault(name, []).append(value)
    return out
