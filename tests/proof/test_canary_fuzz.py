"""Cross-tenant canary fuzz: 3 tenants x 3 end users, each holding a unique canary in every store (messages,
memories, bridge, open buffer, display name). Every read path the URL resolver lists (REST, search, context,
assistant turns, /v1/chat/completions, export, Django admin) is hit with each tenant's key and the other tenants'
ids, mixed ids, and missing, empty and wildcard ids; writes aimed at foreign ids must change nothing.

Figure printed: requests sent, canaries leaked across tenants (must be 0), canaries leaked across users of one
tenant on user-scoped paths (must be 0), server errors (must be 0).
"""
from __future__ import annotations

import hashlib
import itertools
import json
import random
import re
import uuid
from collections import Counter
from datetime import datetime, timedelta, timezone

import httpx
import pytest
import respx
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume asynchronous iterators")]

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)
MIN_REQUESTS = 5_000
CANARY_RE = re.compile(r"cnry(\d)(\d)[a-z]{6}")
# Ids that name nothing, or everything: each must be a 404/400 with no data.
JUNK_IDS = ["", " ", "*", "%2A", "%", "_", "..", ".", "null", "None", "undefined", "0", "-1", "true", "[]", "{}",
            "' OR '1'='1", "1 OR 1=1", "%00", "%25", str(uuid.UUID(int=0)), "ffffffff-ffff-ffff-ffff-ffffffffffff",
            str(uuid.uuid4()), str(uuid.uuid4()), "a" * 300]
ID_PARAMETERS = {"user_id", "session_id", "memory_id", "webhook_id", "job_id"}
LLM_URL = "http://llm.test/v1"


def _canary(i: int, j: int) -> str:
    rng = random.Random(f"{i}-{j}")
    return f"cnry{i}{j}" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6))


def rnd_spelling(u: uuid.UUID) -> str:
    """One of the other spellings uuid.UUID() also accepts, chosen by the id itself."""
    return [u.hex, "{" + str(u) + "}", f"urn:uuid:{u}"][u.int % 3]


def _variants(value: str) -> list[str]:
    """Spellings that a lax lookup might treat as the same id."""
    out = [value]
    try:
        u = uuid.UUID(value)
        out += [value.upper(), rnd_spelling(u)]
    except ValueError:
        pass
    return out


# --- the world ----------------------------------------------------------------------------------------------------

class World:
    def __init__(self):
        self.tenants = []  # [tenant]
        self.users = {}  # (i, j) -> EndUser
        self.canary = {}  # (i, j) -> str
        self.sessions = {}  # (i, j) -> [closed session id, open session id]
        self.memories = {}  # (i, j) -> [memory ids]
        self.messages = {}  # (i, j) -> [message ids]
        self.webhooks = {}  # (i, j) -> [webhook endpoint ids]
        self.jobs = {}  # (i, j) -> [import job ids]
        self.staff = {}  # i -> staff User


def _build_world(make_tenant, django_user_model) -> World:
    from django.contrib.auth.models import Permission

    from memory.actions import memory_create
    from orchestration.messages import message_extract, messages_append
    from orchestration.sessions import session_close, session_open
    from orchestration.sessions import session_finish as _session_finish
    from sessions.services import NewMessage
    from tenants.services import end_user_create
    from webhooks.services import webhook_endpoint_create

    world = World()
    every_permission = list(Permission.objects.all())
    for i in range(3):
        tenant = make_tenant(f"Canary{i}", requests_per_minute=1_000_000, tokens_per_minute=100_000_000,
                             open_policy="return_open")
        world.tenants.append(tenant)
        staff = django_user_model.objects.create_user(username=f"staff{i}", password="x", is_staff=True)
        staff.user_permissions.set(every_permission)
        tenant.staff_users.add(staff)
        world.staff[i] = staff
        for j in range(3):
            c = _canary(i, j)
            world.canary[(i, j)] = c
            # The same external ids in every tenant: "user-0" of one tenant is not "user-0" of another.
            user = end_user_create(tenant=tenant, external_id=f"user-{j}", display_name=f"Pat {c}")
            world.users[(i, j)] = user
            # Opted into content, so the deliveries of what follows carry canaries too (shown in the admin).
            endpoint, _ = webhook_endpoint_create(tenant=tenant, url=f"https://hooks.example.com/{c}",
                                                  description=f"hook {c}", include_content=True)
            world.webhooks[(i, j)] = [str(endpoint.pk)]
            closed, _ = session_open(tenant=tenant, user=user, title=f"trip {c}", opened_at=T0)
            rows = messages_append(tenant=tenant, session_id=closed.pk, enqueue_extraction=False, items=[
                NewMessage(role="user", content=f"My favourite colour is {c}. I want to book a trip to {c} island.",
                           created_at=T0),
                NewMessage(role="assistant", content=f"Noted: {c} it is.", created_at=T0 + timedelta(seconds=5)),
                NewMessage(role="user", content=f"My locker number is {c} and I prefer {c} tea.",
                           created_at=T0 + timedelta(seconds=10)),
            ])
            for m in rows:
                message_extract(tenant_id=m.tenant_id, message_id=m.pk)
            session_close(tenant=tenant, session_id=closed.pk)
            _session_finish(tenant_id=closed.tenant_id, session_id=closed.pk)
            opened, _ = session_open(tenant=tenant, user=user, opened_at=T0 + timedelta(days=1))
            rows += messages_append(tenant=tenant, session_id=opened.pk, enqueue_extraction=False, items=[
                NewMessage(role="user", content=f"Remind me about {c} please.", created_at=T0 + timedelta(days=1))])
            record = memory_create(tenant=tenant, user=user, kind="fact", text=f"Pat's codename is {c}.",
                                   confidence=0.9)
            world.sessions[(i, j)] = [str(closed.pk), str(opened.pk)]
            world.messages[(i, j)] = [str(m.pk) for m in rows]
            from memory.models import MemoryRecord

            world.memories[(i, j)] = [str(pk) for pk in MemoryRecord.objects.unscoped().filter(user=user)
                                      .values_list("pk", flat=True)]
            from orchestration.models import ImportJob

            job = ImportJob.objects.create(tenant=tenant, user=user, format="openai", status="done",
                                           file_name=f"export {c}.json")
            world.jobs[(i, j)] = [str(job.pk)]
            assert record and str(record.pk) in world.memories[(i, j)]
    return world


def _foreign_state(world: World) -> str:
    """A digest of everything each tenant holds, to prove that writes aimed at foreign ids changed nothing."""
    from infra.vector_store import Scope, get_vector_store
    from memory.models import MemoryRecord
    from sessions.models import Message, Session
    from tenants.models import EndUser
    from webhooks.models import WebhookEndpoint

    parts = []
    for tenant in world.tenants:
        parts.append(sorted(MemoryRecord.objects.unscoped().filter(tenant=tenant).values_list("pk", "text", "status")))
        parts.append(sorted(Session.objects.unscoped().filter(tenant=tenant).values_list("pk", "state")))
        parts.append(Message.objects.unscoped().filter(tenant=tenant).count())
        parts.append(sorted(EndUser.objects.unscoped().filter(tenant=tenant).values_list("pk", "external_id")))
        parts.append(sorted(WebhookEndpoint.objects.unscoped().filter(tenant=tenant).values_list(
            "pk", "url", "description", "is_active", "include_content", "secret_sealed")))
        parts.append(get_vector_store().count(Scope(tenant_id=str(tenant.pk))))
    return hashlib.sha256(repr(parts).encode()).hexdigest()


# --- the routes ---------------------------------------------------------------------------------------------------

def _routes():
    """(route, view) for every API route: new endpoints join the fuzz without editing this file."""
    def walk(patterns, prefix=""):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                yield prefix + str(p.pattern), p.callback

    for route, callback in walk(get_resolver().url_patterns):
        if route.startswith(("api/v1/", "v1/")):
            yield route, callback


def _methods(callback) -> list[str]:
    view = getattr(callback, "view_class", None)
    if view is None:
        return ["get", "post"]  # function views (the OpenAI surface): try both
    return [m for m in ("get", "post", "patch", "put", "delete") if hasattr(view, m)]


def _parameters(route: str) -> list[str]:
    return re.findall(r"<(?:\w+:)?(\w+)>", route)


# --- the requests -------------------------------------------------------------------------------------------------

class Tally:
    def __init__(self, world: World):
        self.world = world
        self.sent = 0
        self.cross_tenant: list[str] = []
        self.cross_user: list[str] = []
        self.server_errors: list[str] = []
        self.statuses = Counter()
        self.per_route = Counter()
        self.own_seen = Counter()  # occurrences of the caller's own canaries: proof the paths carry data

    def check(self, caller: int, label: str, response, *, scoped_user: tuple | None = None, echoes=()):
        """Count the response; any canary in it that the caller may not see is a leak. `echoes` are strings the
        caller itself sent (a query echoed back in the answer is not a leak)."""
        self.sent += 1
        self.per_route[label] += 1
        self.statuses[response.status_code] += 1
        body = b"".join(response) if getattr(response, "streaming", False) else response.content
        text = body.decode(errors="replace")
        for echo in echoes:
            text = text.replace(echo, "")
        if response.status_code >= 500 and response.status_code != 503:
            self.server_errors.append(f"{label} -> {response.status_code}: {text[:200]}")
        for m in CANARY_RE.finditer(text):
            owner = (int(m.group(1)), int(m.group(2)))
            if owner[0] == caller:
                self.own_seen[label.split(" ")[0] + " " + label.split(" ")[-1]] += 1
            if owner[0] != caller:
                self.cross_tenant.append(f"tenant {caller} {label} -> {response.status_code} shows {m.group(0)}")
            elif scoped_user is not None and owner != scoped_user:
                self.cross_user.append(f"{scoped_user} {label} -> {response.status_code} shows {m.group(0)}")
        return response


def _api_client(tenant) -> APIClient:
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {tenant.plain_key}")
    return client


def _echo_llm(request: httpx.Request) -> httpx.Response:
    """A model that repeats its system context back: whatever the service put in front of it becomes visible."""
    body = json.loads(request.content)
    system = "\n".join(m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "system")
    content = json.dumps({}) if body.get("response_format") else f"ECHO {system}"
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    if body.get("stream"):
        chunk = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
                 "choices": [{"index": 0, "delta": {"role": "assistant", "content": content}, "finish_reason": None}]}
        end = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}
        return httpx.Response(200, text=f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(end)}\n\ndata: [DONE]\n\n",
                              headers={"content-type": "text/event-stream"})
    return httpx.Response(200, json={"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                     "choices": [{"index": 0, "finish_reason": "stop",
                                                  "message": {"role": "assistant", "content": content}}],
                                     "usage": usage})


def _id_pool(world: World, name: str, caller: int) -> list[tuple[str, tuple | None]]:
    """(value, owner) for every id of that kind: other tenants' (with spelling variants), the caller's own, junk."""
    out = []
    for key, user in world.users.items():
        ids = {"user_id": [str(user.pk)], "session_id": world.sessions[key], "memory_id": world.memories[key],
               "webhook_id": world.webhooks[key], "job_id": world.jobs[key], "model_id": []}[name]
        for value in ids:
            spellings = _variants(value) if key[0] != caller else [value]
            out += [(v, key) for v in spellings]
    out += [(junk, None) for junk in JUNK_IDS]
    return out


def _url(route: str, values: dict) -> str:
    path = route
    for name, value in values.items():
        path = re.sub(rf"<(?:\w+:)?{name}>", value.replace("/", "%2F") if value not in ("..", ".") else value, path)
    return "/" + path


def _classify_routes():
    reads, writes = [], []
    for route, callback in _routes():
        params = _parameters(route)
        # A model id names the deployment's model, not a tenant's row (the OpenAI surface is fuzzed on its own).
        unknown = set(params) - ID_PARAMETERS - ({"model_id"} if route.startswith("v1/") else set())
        assert not unknown, f"{route}: teach the canary fuzz an id pool for {unknown}"
        for method in _methods(callback):
            (reads if method == "get" or route.endswith(("/turns", "chat/completions")) else writes).append(
                (route, method, params))
    assert any("memories/search" in r for r, _, _ in reads) and any("context" in r for r, _, _ in reads)
    return reads, writes


# Questions that reach for the canaries by meaning, never by spelling: a turn stores its input, and a foreign
# canary typed into the caller's own session would be the caller's data from then on.
PROBES = ["What is my favourite colour?", "What is my codename?", "Which island did I want to visit?",
          "What tea do I like and what is my locker number?"]


def _fuzz_reads(world: World, tally: Tally, rng: random.Random):
    reads, _ = _classify_routes()
    for caller, tenant in enumerate(world.tenants):
        client = _api_client(tenant)
        foreign_canaries = [c for key, c in world.canary.items() if key[0] != caller]
        for route, method, params in reads:
            label = f"{method.upper()} /{route}"
            if route.startswith("v1/"):
                continue  # the OpenAI surface is fuzzed below with its own headers
            pools = [_id_pool(world, p, caller) for p in params]
            combos = list(itertools.product(*pools))
            if len(combos) > 400:  # two ids: half pair a foreign or junk id with the caller's own, half anything
                mixed = [c for c in combos if any(owner and owner[0] == caller for _, owner in c)]
                rest = [c for c in combos if not any(owner and owner[0] == caller for _, owner in c)]
                combos = rng.sample(mixed, min(len(mixed), 200)) + rng.sample(rest, min(len(rest), 200))
            for combo in combos:
                values = {p: v for p, (v, _) in zip(params, combo)}
                owners = [owner for _, owner in combo]
                own_path = all(o is not None and o[0] == caller for o in owners)
                # A path naming one of the caller's users may show that user's canaries, and no one else's.
                scoped = owners[0] if own_path and len(set(owners)) == 1 else None
                queries = [{}]
                if own_path:  # the caller's own object, asked about other tenants' canaries
                    queries = [{"q": c, "input": c} for c in rng.sample(foreign_canaries, 3)] + [{}]
                for query in queries:
                    url = _url(route, values)
                    if method == "get":
                        q = {k: v for k, v in query.items() if (k == "q" and "search" in route)
                             or (k == "input" and "context" in route)}
                        if "search" in route and "q" not in q:
                            q = {"q": "what do you know about me"}
                        response = client.get(url, q)
                    else:  # assistant turns: the echo model shows the whole context it was given
                        response = client.post(url, {"input": rng.choice(PROBES)}, format="json")
                    tally.check(caller, label, response, scoped_user=scoped, echoes=list(q.values()) if method == "get"
                                else ())
                    if not own_path and response.status_code < 400:
                        tally.cross_tenant.append(f"tenant {caller} {label} {url} answered {response.status_code}")



def _fuzz_writes(world: World, tally: Tally, rng: random.Random):
    """Writes aimed at foreign and junk ids: every one must be refused (the caller also checks nothing changed)."""
    _, writes = _classify_routes()
    for caller, tenant in enumerate(world.tenants):
        client = _api_client(tenant)
        for route, method, params in writes:
            if not params:
                continue
            label = f"{method.upper()} /{route}"
            pools = [[(v, o) for v, o in _id_pool(world, p, caller) if o is None or o[0] != caller] for p in params]
            combos = list(itertools.product(*pools))
            for combo in rng.sample(combos, min(len(combos), 60)):
                url = _url(route, {p: v for p, (v, _) in zip(params, combo)})
                body = {"text": "pwned", "role": "user", "content": "pwned", "status": "deleted"}
                response = getattr(client, method)(url, body, format="json")
                tally.check(caller, label, response)
                if response.status_code < 400:
                    tally.cross_tenant.append(f"tenant {caller} {label} {url} answered {response.status_code}")
        # Opening a session for a foreign user is a write too.
        for value, owner in _id_pool(world, "user_id", caller):
            if owner is not None and owner[0] == caller:
                continue
            response = client.post("/api/v1/sessions", {"user_id": value}, format="json")
            tally.check(caller, "POST /api/v1/sessions", response)
            if response.status_code < 400:
                tally.cross_tenant.append(f"tenant {caller} opened a session for {value}")


def _fuzz_openai(world: World, tally: Tally, rng: random.Random):
    for caller, tenant in enumerate(world.tenants):
        client = APIClient(raise_request_exception=False)
        auth = {"HTTP_AUTHORIZATION": f"Bearer {tenant.plain_key}"}
        tally.check(caller, "GET /v1/models", client.get("/v1/models", **auth))
        sessions = [(v, o) for v, o in _id_pool(world, "session_id", caller)]
        users = [f"user-{j}" for j in range(3)] + [str(u.pk) for u in world.users.values()] + JUNK_IDS[:8]
        for user_header in users:
            for session_header, owner in rng.sample(sessions, 3) + [(None, None)]:
                ask = rng.choice(PROBES)
                for stream in (False, True):
                    body = {"model": "continuum", "stream": stream, "user": user_header,
                            "messages": [{"role": "user", "content": ask}]}
                    headers = dict(auth)
                    if session_header is not None:
                        headers["HTTP_X_SESSION_ID"] = session_header
                    response = client.post("/v1/chat/completions", json.dumps(body), content_type="application/json",
                                           **headers)
                    tally.check(caller, "POST /v1/chat/completions", response)
                    if owner is not None and owner[0] != caller and response.status_code < 400:
                        tally.cross_tenant.append(f"tenant {caller} used session {session_header}")


def _fuzz_admin(world: World, tally: Tally, rng: random.Random):
    from django.contrib import admin
    from django.test import Client

    for caller, staff in world.staff.items():
        client = Client(raise_request_exception=False)
        client.force_login(staff)
        foreign_canaries = [c for key, c in world.canary.items() if key[0] != caller]
        foreign_ids = [v for key in world.users if key[0] != caller
                       for v in [str(world.users[key].pk), *world.sessions[key], *world.memories[key],
                                 *world.messages[key], *world.webhooks[key], *world.jobs[key],
                                 str(world.tenants[key[0]].pk)]]
        for model, model_admin in admin.site._registry.items():
            base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
            label = f"admin {model._meta.label}"
            tally.check(caller, label, client.get(base))
            for c in rng.sample(foreign_canaries, 3):
                tally.check(caller, label, client.get(base, {"q": c}), echoes=[c])
            tally.check(caller, label, client.get(base, {"tenant__id__exact": str(world.tenants[(caller + 1) % 3].pk)}))
            for value in rng.sample(foreign_ids, 8) + rng.sample(JUNK_IDS, 4):
                for suffix in ("change/", "history/", "delete/"):
                    response = tally.check(caller, label, client.get(f"{base}{value}/{suffix}"))
                    if response.status_code == 200 and value in foreign_ids:
                        tally.cross_tenant.append(f"staff {caller} opened {base}{value}/{suffix}")
            for field in getattr(model_admin, "autocomplete_fields", ()) or ():
                for c in rng.sample(foreign_canaries, 2) + ["user-0", ""]:
                    tally.check(caller, "admin autocomplete", client.get("/admin/autocomplete/", {
                        "app_label": model._meta.app_label, "model_name": model._meta.model_name,
                        "field_name": field, "term": c}), echoes=[c] if c else [])


@respx.mock
def test_no_canary_crosses_tenants(make_tenant, django_user_model, settings):
    world = _build_world(make_tenant, django_user_model)
    before = _foreign_state(world)
    # Every canary is really in the stores the read paths serve from, so a leak would show.
    owner_client = _api_client(world.tenants[0])
    export = owner_client.get(f"/api/v1/users/{world.users[(0, 0)].pk}/memories/export").content.decode()
    assert world.canary[(0, 0)] in export
    search = owner_client.get(f"/api/v1/users/{world.users[(0, 0)].pk}/memories/search",
                              {"q": "favourite colour"}).content.decode()
    assert world.canary[(0, 0)] in search

    settings.LLM_BASE_URL, settings.LLM_MODEL, settings.LLM_MAX_RETRIES = LLM_URL, "m", 0
    respx.post(f"{LLM_URL}/chat/completions").mock(side_effect=_echo_llm)
    respx.route(host="127.0.0.1").pass_through()
    respx.route(host="localhost").pass_through()

    rng = random.Random(20240501)
    tally = Tally(world)
    _fuzz_writes(world, tally, rng)  # first, so the digest below sees only what foreign writes could have done
    after = _foreign_state(world)
    _fuzz_reads(world, tally, rng)
    _fuzz_openai(world, tally, rng)
    _fuzz_admin(world, tally, rng)

    print(f"\ncanary fuzz figure: {tally.sent} requests over {len(tally.per_route)} read and write paths, "
          f"canaries leaked across tenants: {len(tally.cross_tenant)}, across users of a tenant: "
          f"{len(tally.cross_user)}, server errors: {len(tally.server_errors)}; "
          f"statuses {dict(sorted(tally.statuses.items()))}")
    for line in tally.cross_tenant[:10] + tally.cross_user[:10] + tally.server_errors[:10]:
        print("  ", line[:300])
    print(f"   the caller's own canaries seen (occurrences), by path: {dict(sorted(tally.own_seen.items()))}")
    assert tally.sent >= MIN_REQUESTS
    # The fuzz is only as good as the paths it reaches: data must flow where it is allowed to.
    for path in ("/api/v1/sessions/<str:session_id>/context", "/api/v1/users/<str:user_id>/memories/search",
                 "/api/v1/sessions/<str:session_id>/turns", "/v1/chat/completions",
                 "/api/v1/users/<str:user_id>/memories/export"):
        assert any(k.endswith(path) for k in tally.own_seen), f"no own canary ever came back from {path}"
    assert tally.cross_tenant == []
    assert tally.cross_user == []
    assert tally.server_errors == []
    assert before == after, "a write aimed at foreign or junk ids changed some tenant's data"
