"""LoCoMo retrieval benchmark: import conversations through the service, retrieve, and score evidence recall.

Protocol (../shared/DESIGN.md): every conversation is imported through the service's own ingestion path — one
tenant, one end user per speaker, one session per dataset session and speaker (its time from the dataset,
each `dia_id` kept as the message's external id; the speaker's turns are that user's messages, the other
speaker's turns are the assistant's), every session closed, extraction run (Celery tasks run in-process).
Then for every question of categories 1–4, memories of both speakers are retrieved and mapped through their
provenance back to `dia_id`s. A memory counts for at most its three most direct source turns (its own turn
first; neighbours shown with it count, and cost their tokens); summaries count for none.

Reported beside a plain dense baseline (every raw turn "Speaker: text", top-k cosine, same embedder) and the
full conversation's tokens: evidence recall@5/10/20 (k memories vs k turns, no token budget, no expansion),
recall within 500/1,000/2,000 context tokens (`budget_context`: the memory section a composed context holds at that
budget, counted as the model reads it: the section's framing, the standing profile first, then the retrieved
memories with their headings, dates and neighbouring turns; the baseline takes "Speaker: text" turns best-first, each
that still fits), mean context tokens (and of them the memory text alone), and retrieval latency p50/p95 (query
embedding included). Beside evidence recall within 1,000 tokens, for every question (overall, by type, and per question
in --json): the gold answer's content share, the share of its content words (bench/scoring.py: normalised, stopwords
dropped, an inflection counts as the word) that the section holds, and the same for the dense baseline's turns. Recall
credits a memory to its source turn whatever its text says; this asks whether the words that answer were shown.
No LLM is used unless --use-llm is given and one is configured. bench/answers.py hands a reader model the same section
(`budget_context`), so its answers are scored on what these figures measure.

    .venv/bin/python bench/locomo.py [DATASET] [--json out.json] [--database-url URL] [--reuse-dir DIR]
        [--misses misses.json]

DATASET may be the product-shaped set (bench/product_set.py writes bench/data/product-dev.json): its questions carry
a `type` (across-sessions, temporal, standing, update, single-session) and figures are reported by type as well.

With --reuse-dir the imported data is kept for the next run: the Edge folder (and the SQLite file) live in DIR,
and DIR/imported.json names the tenant and users; a run that finds it skips the import. Give the same
--database-url (and dataset and --conversations) each time, since the database is not copied into DIR.
"""
from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import pstats
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.django_env import AS_DEPLOYED, NO_LLM, bench_django_start, report_write  # noqa: E402

# The LoCoMo dev set beside the checkout when there is one (development), else the short conversation shipped here.
QUICK_DATASET = REPO / "bench" / "data" / "quick-conversation.json"
DEFAULT_DATASET = next(p for p in (REPO.parent / "shared" / "bench" / "locomo-dev.json", QUICK_DATASET) if p.is_file())
KS = (5, 10, 20)
BUDGETS = (500, 1000, 2000)
CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dataset", nargs="?", default=str(DEFAULT_DATASET), help="a file in LoCoMo's format")
    p.add_argument("--json", dest="json_path", help="also write the figures here")
    p.add_argument("--database-url", default="", help="scratch database (default: SQLite in a temp folder)")
    p.add_argument("--conversations", type=int, default=0, help="only the first N conversations (0: all)")
    p.add_argument("--use-llm", action="store_true", help="let extraction and retrieval use a configured LLM")
    p.add_argument("--llm-queries", default="", metavar="BASE_URL",
                   help="import without a model, then let this OpenAI-compatible model plan each question's search "
                        "(rewrite and parts, memory.retrieval.query.query_plan); latency then includes nothing of it")
    p.add_argument("--plans", default="", metavar="FILE",
                   help="with --llm-queries: keep each question's plan here (JSON) and reuse the ones already in it")
    p.add_argument("--reuse-dir", default="",
                   help="keep the imported data here and reuse it on the next run (same --database-url)")
    p.add_argument("--shape", choices=("two-users", "assistant"), default="two-users",
                   help="two-users: each speaker an end user (the protocol of the published figures); assistant: "
                        "the product's shape, the first speaker the user and the other the assistant")
    p.add_argument("--drop-assistant-turns", action="store_true",
                   help="with --shape assistant: keep only the user's words (what the product did before it kept "
                        "the assistant's turns), for a side-by-side figure")
    p.add_argument("--misses", default="", metavar="FILE",
                   help="write the questions not fully answered within 1,000 tokens here (JSON): type, evidence "
                        "turns and their text, and what was returned")
    p.add_argument("--no-profile", action="store_true",
                   help="leave the standing profile out of each budget (for a figure without it); by default each "
                        "budget holds the profile section first, as a composed context does, and retrieval the rest")
    p.add_argument("--profile", default="", metavar="FILE",
                   help="profile the timed calls (each question's 1,000-token context) with cProfile and write the "
                        "statistics here (pstats format); the top functions by cumulative time are printed")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="torch CPU threads (more threads than idle cores make one short query ~20x slower)")
    p.add_argument("--quick", action="store_true",
                   help="the short conversation shipped in bench/data (seconds): shows the bench runs, not its figures")
    args = p.parse_args(argv)
    if args.quick:
        args.dataset, args.conversations = str(QUICK_DATASET), 1
    return args


def _setup_django(args, workdir: Path) -> None:
    env = {"QDRANT_URL": "", "CELERY_TASK_ALWAYS_EAGER": "true", "CONTINUUM_EMBEDDED_WORKER": "false"}
    bench_django_start(workdir=workdir, database_url=args.database_url,
                       env={**env, **({} if args.use_llm else NO_LLM)}, defaults=AS_DEPLOYED)


class CachingEmbedder:
    """The configured embedder with a cache for the import (extraction and the outbox embed the same texts).

    Queries are never served from it: `caching` is switched off before the questions, so every retrieval
    pays for its own query embedding.
    """

    def __init__(self, inner):
        self.inner, self.model_name, self.dim = inner, inner.model_name, inner.dim
        self.one_per_forward = getattr(inner, "one_per_forward", False)  # queries embedded as the service does
        self._cache: dict[str, list[float]] = {}
        self.caching = True

    def embed(self, texts):
        if not self.caching:
            # Every timed embedding is computed: the embedder's own memory of recent texts is emptied first.
            recent = getattr(self.inner, "recent", None)
            if recent is not None:
                recent.clear()
            return self.inner.embed(texts)
        keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in self._cache))
        if missing:
            for t, v in zip(missing, self.inner.embed(missing)):
                self._cache[hashlib.sha1(t.encode()).hexdigest()] = v
        return [self._cache[k] for k in keys]


def parse_session_date(raw: str) -> datetime:
    """'1:56 pm on 8 May, 2023' → an aware datetime (UTC)."""
    return datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def turns_and_questions(data: list[dict]) -> tuple[list[str], list[str]]:
    """Every turn of the dataset as "Speaker: text", and every question, in the dataset's order."""
    turns, questions = [], []
    for conv in data:
        for key, value in conv["conversation"].items():
            if key.startswith("session_") and isinstance(value, list):
                turns += [f'{t["speaker"]}: {t["text"]}' for t in value]
        questions += [q["question"] for q in conv["qa"]]
    return turns, questions


def sessions_of(conversation: dict) -> list[tuple[int, datetime, list[dict]]]:
    out, n = [], 1
    while f"session_{n}" in conversation:
        turns = conversation[f"session_{n}"]
        if turns:
            out.append((n, parse_session_date(conversation[f"session_{n}_date_time"]), turns))
        n += 1
    return out


def turn_content(turn: dict) -> str:
    """What a chat client would send: the text, and a shared image as its caption."""
    text = turn.get("text") or ""
    if turn.get("blip_caption"):
        text = f"{text} [shares an image: {turn['blip_caption']}]".strip()
    return text


def import_sample(sample: dict, tenant, shape: str = "two-users", *, sessions: int | None = None,
                  opened: dict | None = None) -> dict:
    """One conversation through the service: users, sessions with dataset dates, messages, close, extraction.

    shape "two-users": each speaker is an end user with a session per dataset session (their turns are the user's,
    the other's are the assistant's). shape "assistant": the product's own shape, one end user (the first speaker)
    and the other speaker as the assistant, one session per dataset session. sessions: only the first N; opened,
    when given, receives each stored session under (dataset session number, speaker)."""
    from orchestration.messages import message_extract, messages_append, messages_pending_extraction
    from orchestration.sessions import session_close, session_open
    from sessions.services import NewMessage
    from tenants.services import end_user_create

    conv = sample["conversation"]
    speakers = [conv["speaker_a"], conv["speaker_b"]] if shape == "two-users" else [conv["speaker_a"]]
    users = {name: end_user_create(tenant=tenant, external_id=f"{sample['sample_id']}:{name}", display_name=name)
             for name in speakers}
    for number, started, turns in sessions_of(conv)[:sessions]:
        for name, user in users.items():
            session, _ = session_open(tenant=tenant, user=user, external_id=f"{sample['sample_id']}:{number}",
                                      opened_at=started)
            items = [NewMessage(role="user" if t["speaker"] == name else "assistant",
                                name="" if t["speaker"] == name else t["speaker"], content=turn_content(t),
                                external_id=t["dia_id"], created_at=started + timedelta(seconds=30 * i))
                     for i, t in enumerate(turns)]
            messages_append(tenant=tenant, session_id=session.pk, items=items)  # extraction enqueued (eager)
            session_close(tenant=tenant, session_id=session.pk, reason="import",
                          closed_at=started + timedelta(seconds=30 * len(turns)))
            for mid in messages_pending_extraction(tenant_id=tenant.pk, session_id=session.pk, limit=10_000):
                message_extract(tenant_id=tenant.pk, message_id=mid)  # anything the eager queue left behind
            if opened is not None:
                opened[(number, name)] = session
    return users


def _reused_import(marker: Path, data: list[dict], Tenant, EndUser, shape: str):
    """(tenant, users by sample, import seconds) of an earlier import of the same conversations, else None."""
    if not marker.exists():
        return None
    saved = json.loads(marker.read_text())
    if saved.get("shape", "two-users") != shape:
        raise SystemExit(f"{marker} holds an import of another --shape; use another --reuse-dir")
    if saved.get("samples") != [s["sample_id"] for s in data]:
        raise SystemExit(f"{marker} holds another set of conversations; use another --reuse-dir")
    tenant = Tenant.objects.filter(pk=saved["tenant_id"]).first()
    if tenant is None:
        raise SystemExit(f"{marker} names a tenant this database lacks; give the same --database-url")
    found = {str(u.pk): u for u in EndUser.objects.for_tenant(tenant)}
    users = {sid: {name: found[uid] for name, uid in names.items()} for sid, names in saved["users"].items()}
    from infra.vector_store import Scope, get_vector_store

    # The vectors live in the folder's own store (QDRANT_EDGE_PATH): a marker copied into another folder reuses the
    # rows without them, and every retrieval would then come back empty without an error.
    some = next(u for names in users.values() for u in names.values())
    if not get_vector_store().count(Scope(tenant_id=str(tenant.pk), user_id=str(some.pk))):
        raise SystemExit(f"{marker}: the vector store in {marker.parent} holds none of this import's points; reuse "
                         "the folder the import was made in")
    return tenant, users, saved.get("import_seconds", 0.0)


def import_or_reuse(*, data: list[dict], shape: str, marker: Path | None, drop_assistant_turns: bool = False,
                    tenant_name: str = "LoCoMo bench") -> tuple:
    """(tenant, users by sample, import seconds): the conversations imported into a new tenant, or, when `marker`
    names an earlier import of the same conversations and shape, that import. A new import writes `marker`."""
    from memory.models import MemoryRecord
    from tenants.models import EndUser, Tenant
    from tenants.services import tenant_create

    reused = _reused_import(marker, data, Tenant, EndUser, shape) if marker is not None else None
    if reused:
        print(f"reusing the import in {marker} (tenant {reused[0].pk})", flush=True)
        return reused
    # Old conversations (2023) must not expire under today's clock: this tenant keeps events and goals.
    # With two users, the other speaker's turns are that speaker's own memories already: a copy of each as
    # "what the assistant said" would store every turn twice, so this tenant keeps users' words only.
    tenant = tenant_create(name=tenant_name, slug=f"locomo-{uuid.uuid4().hex[:6]}",
                           memory_ttl_days={"event": None, "goal": None},
                           remember_assistant_turns=shape == "assistant" and not drop_assistant_turns)
    t0 = time.perf_counter()
    users_by_sample = {}
    for sample in data:
        users_by_sample[sample["sample_id"]] = import_sample(sample, tenant, shape=shape)
        print(f"imported {sample['sample_id']}: {MemoryRecord.objects.for_tenant(tenant).count()} memories "
              f"so far", flush=True)
    import_seconds = time.perf_counter() - t0
    if marker is not None:
        # Written last: a run interrupted mid-import leaves no marker and the next one imports afresh.
        marker.write_text(json.dumps({
            "tenant_id": str(tenant.pk), "samples": [s["sample_id"] for s in data], "shape": shape,
            "import_seconds": import_seconds,
            "users": {sid: {name: str(u.pk) for name, u in users.items()}
                      for sid, users in users_by_sample.items()}}, indent=2))
    return tenant, users_by_sample, import_seconds


class BudgetContext(NamedTuple):
    """What a turn's context shows the model of memory at one token budget: the standing profile section first, then
    the retrieved memories, framed as the composer frames its memory section. (A named tuple, not a dataclass: tests
    load this file by path, outside sys.modules, where a dataclass cannot be built.)"""

    text: str  # the memory section as the model reads it (context.memory_section.memory_section_text)
    tokens: int  # its tokens, framing included
    memories: list  # the retrieved memories shown (memory.retrieval.RetrievedMemory)
    profile: list  # the profile entries shown (memory.profile.ProfileEntry)
    profile_text: str
    profile_tokens: int
    retrieval_ms: float  # reading the profile and retrieving (what bench/locomo.py times), rendering not included


def budget_context(*, tenant, users: list, question: str, budget: int, profile: bool = True) -> BudgetContext:
    """The memory section a composed context holds for this question within `budget` tokens, as the product builds
    it: the profile (read by kind, not by the question) in its bounded share (context.budget.profile_share), then
    retrieval fills what is left after the section's framing, skipping what the profile already shows, each hit
    with its neighbouring turns. Access is not counted (in production that is a task after the response)."""
    from context.budget import memory_section_allowance, profile_share
    from context.memory_section import memory_section_text, profile_section_render
    from infra.tokens import count_tokens
    from memory.profile import profile_select
    from memory.retrieval import memory_retrieve_for_users
    from sessions.turn_reads import turns_around

    start = time.perf_counter()
    shown, profile_tokens, profile_text = [], 0, ""
    if profile:
        entries = [e for u in users for e in profile_select(tenant=tenant, user=u)]
        profile_text, profile_tokens, shown = profile_section_render(entries, limit_tokens=profile_share(budget))
    got = memory_retrieve_for_users(tenant=tenant, users=users, query=question, k=1000,
                                    token_budget=memory_section_allowance(budget, profile_tokens=profile_tokens),
                                    record_access=False, neighbours=turns_around,
                                    skip_ids={e.memory_id for e in shown})
    retrieval_ms = (time.perf_counter() - start) * 1000
    text = memory_section_text(got, profile_text)
    return BudgetContext(text=text, tokens=count_tokens(text) if text else 0, memories=got, profile=shown,
                         profile_text=profile_text, profile_tokens=profile_tokens, retrieval_ms=retrieval_ms)


def evidence_recall(evidence: set[str], found: set[str]) -> float:
    return len(evidence & found) / len(evidence)


def memory_dia_ids(memory, dia_of: dict[str, str]) -> set[str]:
    """At most the three most direct source turns: its own turn(s) first, then the neighbours shown with it."""
    ids = list(dict.fromkeys([*memory.source_message_ids, *memory.neighbour_message_ids]))[:3]
    return {dia_of[i] for i in ids if i in dia_of}


def question_type(qa: dict) -> str:
    """A product-set question names its type; a LoCoMo question is named by its category."""
    return qa.get("type") or CATEGORY_NAMES.get(qa.get("category"), str(qa.get("category")))


def _miss(sample_id: str, qa: dict, evidence: set[str], found: set[str], got: list, dia_of: dict,
          text_of: dict) -> dict:
    """One question not fully answered within 1,000 tokens: what it needed, and what came back instead."""
    return {"sample": sample_id, "question": qa["question"], "answer": qa.get("answer"), "type": question_type(qa),
            "evidence": {d: text_of.get(d, "") for d in sorted(evidence)}, "missing": sorted(evidence - found),
            "returned": [{"turns": sorted(memory_dia_ids(m, dia_of)), "kind": m.kind, "score": m.score,
                          "text": m.text, "neighbours": list(m.neighbours)} for m in got]}


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    xs = sorted(values)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def _plan_queries_with(base_url: str, settings, saved: Path | None) -> None:
    """Questions searched as a turn with a model searches them: one planning call per question (cached, so the
    top-k call and each budget's call search the same plan), its time kept apart from retrieval's latency."""
    import openai

    from infra import llm
    from infra.local_profile import profile_apply
    from memory.retrieval import query, retrieve

    probe = openai.OpenAI(base_url=base_url, api_key="not-needed", timeout=10, max_retries=0)
    profile_apply(settings)
    settings.LLM_BASE_URL, settings.LLM_MODEL = base_url, probe.models.list().data[0].id
    settings.MEMORY_QUERY_REWRITE = True
    llm._client.cache_clear()
    inner, plans = retrieve.query_plan, {}
    if saved is not None and saved.is_file():
        plans = {q: query.QueryPlan(p["text"], tuple(p["parts"]), thread=query.asks_for_thread(q))
                 for q, p in json.loads(saved.read_text()).items()}

    def planned(text):
        if text not in plans:
            started = time.perf_counter()
            plans[text] = inner(text)
            PLANNED["calls"] += 1
            PLANNED["seconds"] += time.perf_counter() - started
            if saved is not None:
                saved.write_text(json.dumps({q: {"text": p.text, "parts": list(p.parts)} for q, p in plans.items()},
                                            indent=1))
        PLANNED["asked"][text] = plans[text]
        return plans[text]

    retrieve.query_plan = planned  # replaced where retrieval looks it up
    PLANNED.update(calls=0, seconds=0.0, asked={})


PLANNED: dict = {}


def main(argv=None) -> dict:
    args = _args(argv)
    data = json.loads(Path(args.dataset).read_text())
    if args.conversations:
        data = data[: args.conversations]
    if args.reuse_dir:
        workdir = Path(args.reuse_dir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
    else:
        workdir = Path(tempfile.mkdtemp(prefix="locomo-bench-"))
    marker = workdir / "imported.json"
    _setup_django(args, workdir)

    import numpy as np
    import torch

    from bench.scoring import gold_content_share, mean_of
    from context.budget import ContextBudget
    from infra.embedder import get_embedder, set_embedder
    from infra.tokens import count_tokens
    from infra.vector_store import Scope, get_vector_store
    from memory.models import MemoryRecord
    from memory.retrieval import memory_retrieve_for_users
    from sessions.models import Message
    from sessions.turn_reads import turns_around

    torch.set_num_threads(max(1, args.torch_threads))
    from django.conf import settings

    turn_k, turn_budget = settings.CONTINUUM_CONTEXT_MEMORY_K, ContextBudget.default().retrieval_allowance()
    embedder = CachingEmbedder(get_embedder())
    set_embedder(embedder)
    tenant, users_by_sample, import_seconds = import_or_reuse(
        data=data, shape=args.shape, marker=marker if args.reuse_dir else None,
        drop_assistant_turns=args.drop_assistant_turns)
    from django.db import connection

    if args.llm_queries:
        _plan_queries_with(args.llm_queries, settings, Path(args.plans) if args.plans else None)
    with connection.cursor() as cursor:
        # Planner statistics, as autovacuum would have them on a live database (some servers run without it):
        # without them PostgreSQL guesses one row per filter and picks poor plans for the retrieval queries.
        cursor.execute("ANALYZE")
    dia_of = {str(mid): ext for mid, ext in Message.objects.for_tenant(tenant).values_list("pk", "external_id")}
    baseline_lines = {s["sample_id"]: [f"{t['speaker']}: {t['text']}" for _, _, ts in sessions_of(s["conversation"])
                                       for t in ts] for s in data}
    embedder.embed([line for lines in baseline_lines.values() for line in lines])  # the baseline's index
    embedder.caching = False
    store = get_vector_store()
    with_provenance = MemoryRecord.objects.for_tenant(tenant).filter(source_message__isnull=False).count()
    total_memories = MemoryRecord.objects.for_tenant(tenant).count()

    ours = {"recall_at": {k: [] for k in KS}, "recall_within": {b: [] for b in BUDGETS},
            "tokens": {b: [] for b in BUDGETS}, "latency_ms": [], "latency_ms_topk": [], "latency_ms_turn": [],
            "embed_ms": [], "floor_ms": [],
            "tokens_text_only": {b: [] for b in BUDGETS}}
    base = {"recall_at": {k: [] for k in KS}, "recall_within": {b: [] for b in BUDGETS},
            "tokens": {b: [] for b in BUDGETS}, "latency_ms": []}
    full_tokens, questions = [], 0
    by_category: dict[int, list[float]] = {c: [] for c in CATEGORIES}
    by_type: dict[str, list[float]] = {}
    by_type_within: dict[int, dict[str, list[float]]] = {b: {} for b in BUDGETS}
    base_by_type: dict[str, list[float]] = {}
    answer_shown: dict[str, list[bool]] = {}  # short answers only: does the text the model reads contain it?
    base_answer_shown: dict[str, list[bool]] = {}  # the same for the dense baseline's turns
    misses: list[dict] = []
    # Per question within 1,000 tokens: evidence recall beside the share of the gold answer's content words the
    # context holds (bench/scoring.py), for the service and the dense baseline.
    per_question: list[dict] = []
    profiler = cProfile.Profile() if args.profile else None
    for sample in data:
        conv = sample["conversation"]
        users = list(users_by_sample[sample["sample_id"]].values())
        turns = [t for _, _, ts in sessions_of(conv) for t in ts]
        lines = [f"{t['speaker']}: {t['text']}" for t in turns]
        # The whole conversation as a model would be given it: session dates, then "Speaker: text [image]" lines.
        full_tokens.append(sum(count_tokens(f"{date:%d %B %Y}\n") for _, date, _ in sessions_of(conv))
                           + sum(count_tokens(f"{t['speaker']}: {turn_content(t)}") for t in turns))
        embedder.caching = True
        matrix = np.array(embedder.embed(lines), dtype=np.float32)
        embedder.caching = False
        line_tokens = [count_tokens(line) for line in lines]
        text_of = {t["dia_id"]: f"{t['speaker']}: {turn_content(t)}" for t in turns}
        for qa in sample["qa"]:
            if qa.get("category") not in CATEGORIES or not qa.get("evidence"):
                continue
            questions += 1
            evidence = set(qa["evidence"])
            question = qa["question"]
            scored = {"sample": sample["sample_id"], "question": question, "type": question_type(qa)}
            start = time.perf_counter()
            embedder.embed([question])  # the floor: one query embedding, measured on its own
            ours["embed_ms"].append((time.perf_counter() - start) * 1000)
            # The floor a retrieval cannot beat: one query embedding and one tenant- and user-filtered dense search.
            start = time.perf_counter()
            store.search(Scope(tenant_id=str(tenant.pk), user_id=str(users[0].pk)), dense=embedder.embed([question])[0],
                         text=None, limit=turn_k, statuses=("active",))
            ours["floor_ms"].append((time.perf_counter() - start) * 1000)
            if args.llm_queries:  # planned before the clock starts: the calls below reuse the plan
                from memory.retrieval import retrieve

                retrieve.query_plan(question)
            # Ours: ranked top-k (no budget), then one call per token budget.
            start = time.perf_counter()
            top = memory_retrieve_for_users(tenant=tenant, users=users, query=question, k=max(KS),
                                            record_access=False)
            ours["latency_ms_topk"].append((time.perf_counter() - start) * 1000)
            # The call a turn's context makes: the composer's k and memory-section budget (reported beside).
            start = time.perf_counter()
            memory_retrieve_for_users(tenant=tenant, users=users, query=question, k=turn_k,
                                      token_budget=turn_budget, record_access=False, neighbours=turns_around)
            ours["latency_ms_turn"].append((time.perf_counter() - start) * 1000)
            for k in KS:
                found = set().union(*[memory_dia_ids(m, dia_of) for m in top[:k]]) if top else set()
                ours["recall_at"][k].append(evidence_recall(evidence, found))
            for budget in BUDGETS:
                if budget == 1000 and profiler is not None:
                    profiler.enable()
                # The standing profile first, in its own bounded section (read by kind, not by the question, as a
                # composed context reads it on every turn); retrieval fills what is left of the budget.
                ctx = budget_context(tenant=tenant, users=users, question=question, budget=budget,
                                     profile=not args.no_profile)
                if budget == 1000 and profiler is not None:
                    profiler.disable()
                got, shown, elapsed = ctx.memories, ctx.profile, ctx.retrieval_ms
                if budget == 1000:
                    ours["latency_ms"].append(elapsed)
                found = set().union(*[memory_dia_ids(m, dia_of) for m in got]) if got else set()
                found |= {dia_of[e.source_message_id] for e in shown if e.source_message_id in dia_of}
                r = evidence_recall(evidence, found)
                ours["recall_within"][budget].append(r)
                by_type_within[budget].setdefault(question_type(qa), []).append(r)
                # What the model reads (the rendered block: headings, dates, neighbours), and the memory text alone.
                ours["tokens"][budget].append(ctx.tokens)
                ours["tokens_text_only"][budget].append(
                    sum(count_tokens(m.text) + sum(count_tokens(n) for n in m.neighbours) for m in got))
                if budget == 1000:
                    scored.update(recall=r, gold_share=gold_content_share(str(qa.get("answer", "")), ctx.text))
                    answer = str(qa.get("answer", "")).strip().lower()
                    if answer and len(answer.split()) <= 3:
                        # Recall counts a turn when any memory of it is shown; this asks whether the words that
                        # answer were among what was shown (an excerpt may have left them out).
                        read = ctx.text.lower()
                        answer_shown.setdefault(question_type(qa), []).append(answer in read)
                    by_category[qa["category"]].append(r)
                    by_type.setdefault(question_type(qa), []).append(r)
                    if r < 1 and args.misses:
                        misses.append(_miss(sample["sample_id"], qa, evidence, found, got, dia_of, text_of))
            # Plain dense baseline: the same embedder over every raw turn.
            start = time.perf_counter()
            qv = np.array(embedder.embed([question])[0], dtype=np.float32)
            order = np.argsort(-(matrix @ qv))
            base["latency_ms"].append((time.perf_counter() - start) * 1000)
            for k in KS:
                base["recall_at"][k].append(evidence_recall(evidence, {turns[i]["dia_id"] for i in order[:k]}))
            for budget in BUDGETS:
                used, found, read = 0, set(), []
                for i in order:
                    if used + line_tokens[i] > budget:
                        continue  # passed over, as a composer passes over what does not fit: the next may
                    used += line_tokens[i]
                    found.add(turns[i]["dia_id"])
                    read.append(lines[i])
                base["recall_within"][budget].append(evidence_recall(evidence, found))
                if budget == 1000:
                    base_by_type.setdefault(question_type(qa), []).append(evidence_recall(evidence, found))
                    scored.update(dense_recall=evidence_recall(evidence, found),
                                  dense_gold_share=gold_content_share(str(qa.get("answer", "")), "\n".join(read)))
                    per_question.append(scored)
                    answer = str(qa.get("answer", "")).strip().lower()
                    if answer and len(answer.split()) <= 3:
                        base_answer_shown.setdefault(question_type(qa), []).append(answer in "\n".join(read).lower())
                base["tokens"][budget].append(used)

    def summary(d: dict) -> dict:
        out = {
            "recall_at": {str(k): round(statistics.mean(v), 3) for k, v in d["recall_at"].items()},
            "recall_within_tokens": {str(b): round(statistics.mean(v), 3) for b, v in d["recall_within"].items()},
            "mean_retrieved_tokens": {str(b): round(statistics.mean(v), 1) for b, v in d["tokens"].items()},
            "latency_ms_p50": round(percentile(d["latency_ms"], 0.5), 2),
            "latency_ms_p95": round(percentile(d["latency_ms"], 0.95), 2),
        }
        if "tokens_text_only" in d:
            out["mean_memory_text_tokens"] = {str(b): round(statistics.mean(v), 1)
                                              for b, v in d["tokens_text_only"].items()}
        if "embed_ms" in d:
            out["query_embedding_ms_p50"] = round(percentile(d["embed_ms"], 0.5), 2)
            out["query_embedding_ms_p95"] = round(percentile(d["embed_ms"], 0.95), 2)
            out["floor_ms_p50"] = round(percentile(d["floor_ms"], 0.5), 2)
            out["floor_ms_p95"] = round(percentile(d["floor_ms"], 0.95), 2)
            out["p95_over_floor_p95"] = round(out["latency_ms_p95"] / max(out["floor_ms_p95"], 1e-9), 2)
        if "latency_ms_topk" in d:
            out["latency_ms_topk_p50"] = round(percentile(d["latency_ms_topk"], 0.5), 2)
            out["latency_ms_topk_p95"] = round(percentile(d["latency_ms_topk"], 0.95), 2)
            out["latency_ms_turn_p50"] = round(percentile(d["latency_ms_turn"], 0.5), 2)
            out["latency_ms_turn_p95"] = round(percentile(d["latency_ms_turn"], 0.95), 2)
            out["turn_call"] = {"k": turn_k, "token_budget": turn_budget}
        return out

    def gold_shares(rows: list[dict]) -> dict:
        held = [r for r in rows if r["gold_share"] is not None]

        def share(key: str) -> float | None:
            m = mean_of(r[key] for r in held)
            return None if m is None else round(m, 3)

        return {"service": share("gold_share"), "dense_baseline": share("dense_gold_share"),
                "service_recall": share("recall"), "questions": len(held)}

    result = {
        "dataset": str(args.dataset),
        "conversations": len(data),
        "questions": questions,
        "llm": bool(args.use_llm),
        "query_planning": ({"model": settings.LLM_MODEL, "calls": PLANNED["calls"],
                            "seconds": round(PLANNED["seconds"], 1),
                            "with_parts": sum(bool(p.parts) for p in PLANNED["asked"].values())}
                           if args.llm_queries else None),
        "shape": args.shape + (" (assistant turns dropped)" if args.drop_assistant_turns else ""),
        "profile": not args.no_profile,
        "memories": total_memories,
        "memories_with_provenance": with_provenance,
        "import_seconds": round(import_seconds, 1),
        "full_conversation_tokens_mean": round(statistics.mean(full_tokens), 1),
        "service": summary(ours),
        "dense_baseline": summary(base),
        "service_recall_within_1000_by_category": {str(c): round(statistics.mean(v), 3)
                                                   for c, v in by_category.items() if v},
        "service_recall_within_1000_by_type": {t: {"recall": round(statistics.mean(v), 3), "questions": len(v)}
                                               for t, v in sorted(by_type.items())},
        "service_recall_within_by_type": {str(b): {t: round(statistics.mean(v), 3) for t, v in sorted(types.items())}
                                          for b, types in by_type_within.items()},
        "short_answer_shown_within_1000_by_type": {t: {"rate": round(statistics.mean(v), 3), "questions": len(v)}
                                                   for t, v in sorted(answer_shown.items())},
        "dense_baseline_short_answer_shown_within_1000_by_type": {t: round(statistics.mean(v), 3)
                                                                  for t, v in sorted(base_answer_shown.items())},
        "dense_baseline_recall_within_1000_by_type": {t: round(statistics.mean(v), 3)
                                                      for t, v in sorted(base_by_type.items())},
        "gold_content_share_within_1000": gold_shares(per_question),
        "gold_content_share_within_1000_by_type": {
            t: gold_shares([q for q in per_question if q["type"] == t])
            for t in sorted({q["type"] for q in per_question})},
        "questions_within_1000": [{k: round(v, 3) if isinstance(v, float) else v for k, v in q.items()}
                                  for q in per_question],
        "notes": "service latency: one memory_retrieve_for_users call with a 1,000-token budget over both "
                 "speakers (query embedding, 4 filtered searches, fusion, rerank, database checks, neighbour "
                 "expansion); access counting is skipped (in production it is a task after the response).",
    }
    _print(result)
    if profiler is not None:
        profiler.dump_stats(args.profile)
        pstats.Stats(args.profile).sort_stats("cumulative").print_stats(40)
    if args.misses:
        Path(args.misses).write_text(json.dumps(misses, indent=1, ensure_ascii=False))
    report_write(result, args.json_path)
    return result


def _print(r: dict) -> None:
    s, b = r["service"], r["dense_baseline"]
    print(f"\nLoCoMo retrieval: {r['conversations']} conversations, {r['questions']} questions (categories 1-4), "
          f"{r['memories']} memories ({r['memories_with_provenance']} with a source message), LLM: {r['llm']}, "
          f"shape: {r['shape']}, standing profile in each budget: {r.get('profile')}")
    if r.get("query_planning"):
        q = r["query_planning"]
        print(f"queries planned by {q['model']}: {q['calls']} calls, {q['seconds']} s, {q['with_parts']} with parts")
    print(f"{'':28}{'service':>12}{'dense baseline':>16}")
    for k in KS:
        print(f"{'recall@' + str(k):28}{s['recall_at'][str(k)]:>12.3f}{b['recall_at'][str(k)]:>16.3f}")
    for budget in BUDGETS:
        print(f"{'recall within ' + str(budget) + ' tokens':28}{s['recall_within_tokens'][str(budget)]:>12.3f}"
              f"{b['recall_within_tokens'][str(budget)]:>16.3f}")
    for budget in BUDGETS:
        print(f"{'mean tokens (budget ' + str(budget) + ')':28}{s['mean_retrieved_tokens'][str(budget)]:>12.1f}"
              f"{b['mean_retrieved_tokens'][str(budget)]:>16.1f}")
    print(f"{'  of which memory text':28}" + "".join(f"{s['mean_memory_text_tokens'][str(b)]:>8.0f}"
                                                     for b in BUDGETS) + "  (the rest: headings, dates, markers)")
    print(f"{'retrieval p50 / p95 (ms)':28}{s['latency_ms_p50']:>6.1f} /{s['latency_ms_p95']:>5.1f}"
          f"{b['latency_ms_p50']:>9.1f} /{b['latency_ms_p95']:>5.1f}")
    t = s["turn_call"]
    print(f"{'  as a turn calls it':28}{s['latency_ms_turn_p50']:>6.1f} /{s['latency_ms_turn_p95']:>5.1f}"
          f"  (k={t['k']}, budget {t['token_budget']} tokens: the composer's memory section)")
    print(f"{'query embedding alone p50/p95':28}{s['query_embedding_ms_p50']:>6.1f}"
          f" /{s['query_embedding_ms_p95']:>5.1f}")
    print(f"{'floor p50/p95 (embed+search)':28}{s['floor_ms_p50']:>6.1f} /{s['floor_ms_p95']:>5.1f}"
          f"   retrieval p95 = {s['p95_over_floor_p95']:.2f}x the floor's p95")
    print(f"full conversation: {r['full_conversation_tokens_mean']:.0f} tokens on average; "
          f"recall within 1,000 tokens by category: {r['service_recall_within_1000_by_category']}")
    if r.get("short_answer_shown_within_1000_by_type"):
        dense_shown = r.get("dense_baseline_short_answer_shown_within_1000_by_type") or {}
        print("short answers (3 words or fewer) shown within 1,000 tokens, service / dense baseline: " + ", ".join(
            f"{t} {v['rate']:.3f} / {dense_shown.get(t, 0.0):.3f} ({v['questions']})"
            for t, v in r["short_answer_shown_within_1000_by_type"].items()))
    if r.get("service_recall_within_by_type"):
        print("recall within 500 / 1,000 / 2,000 tokens by type: " + ", ".join(
            f"{t} " + " / ".join(f"{r['service_recall_within_by_type'][str(b)][t]:.3f}" for b in BUDGETS)
            for t in r["service_recall_within_by_type"][str(BUDGETS[0])]))
    print("recall within 1,000 tokens by type (service / dense baseline, questions): " + ", ".join(
        f"{t} {v['recall']:.3f} / {r['dense_baseline_recall_within_1000_by_type'][t]:.3f} ({v['questions']})"
        for t, v in r["service_recall_within_1000_by_type"].items()))
    g = r.get("gold_content_share_within_1000")
    if g and g["questions"]:
        def shown(x):
            return "n/a" if x is None else f"{x:.3f}"

        print(f"gold answer's content words held within 1,000 tokens, service / dense baseline: {shown(g['service'])} "
              f"/ {shown(g['dense_baseline'])} ({g['questions']} questions; their evidence recall "
              f"{shown(g['service_recall'])}); by type: " + ", ".join(
                  f"{t} {shown(v['service'])} / {shown(v['dense_baseline'])} ({v['questions']})"
                  for t, v in r["gold_content_share_within_1000_by_type"].items() if v["questions"]))


if __name__ == "__main__":
    main()
