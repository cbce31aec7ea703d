"""Answers: one fixed reader model answers sampled questions from three contexts, side by side in one run.

The arbiter of whether Continuum's context helps a model answer. For each question, three contexts at one token
budget (--budget, 1,000 by default), each the same rendering the product uses (context.memory_section:
its framing, then memories grouped under "date, session N:" headings, each line "Speaker: words" with relative dates
resolved):
- continuum: exactly the memory section a turn's composer hands the model at that budget (bench/locomo.py
  `budget_context`: the standing profile section first, in its share of the budget, then retrieval over the
  conversation's users, skipping what the profile shows, each hit with its neighbouring turns);
- dense baseline: every turn of the conversation embedded with the same embedder, taken best-first by cosine, each that
  still fits the same budget (a long turn is passed over, not the end of the list); each turn rendered as an
  episodic memory of it would be (its session's date and number, the speaker, its relative dates resolved);
- oracle: the question's own evidence turns, rendered the same way, whatever their length (what a perfect retriever
  would hand over; no budget).

Three sets, one run or one at a time (--sets, locomo and product by default): LoCoMo dev (../shared/bench, each
speaker an end user: bench/locomo.py's "two-users" shape), the product-shaped set bench/data/product-dev.json and
beam-dev (../shared/bench/beam-dev.json, --beam-dataset: long user-assistant project conversations whose gold answers
are often orderings and summaries), both one user and the assistant ("assistant" shape). Questions are sampled per set
with --seed, stratified by type (LoCoMo's categories 1-4 by name; the other sets' types): each type gets its share of
--questions in proportion to its questions, at least one while there are as many questions as types. Left out: a
question without a gold answer (beam-dev's instruction- and preference-following probes), and the product set's
implicit standing probes (a task the instruction governs, "Draft the release notes..."), whose gold is the
instruction to follow rather than an answer: a short answer to a task cannot be scored against it. The pools hold
383 (LoCoMo dev), 252 (product) and 95 (beam-dev) questions.

The reader is the model at --base-url (by default the local llama-server of scripts/local_model.py), temperature 0,
at most 32 tokens, the context in the system message after the reader's instructions (where a composed context puts
it), the question as the user's message. Its answers are kept in a SQLite file (--cache, by default
~/.cache/continuum/answers-cache.sqlite3; --no-cache asks every time) by the SHA-256 of the model's id as the server
reports it (or --model) and the whole request (messages, temperature, max_tokens): a rerun asks the reader only for
the contexts that changed, so the dense and oracle contexts are read once, and a rerun on unchanged contexts asks
nothing. A cached answer keeps the reader seconds of its first reading; each set says how many answers came from the
cache. The held-out conversations written for the project (bench/data/HELDOUT.md) are sets too: `pairs` and
`pairs-b` (friends, "two-users" shape) and `project` ("assistant" shape); each confirms a change decided elsewhere,
and once it has decided one it is no longer held out.

Scores per context, overall and by type (the words as bench/scoring.py normalises them):
- token F1 and exact match against the gold answer (SQuAD normalisation: lower case, punctuation and articles
  dropped, as LoCoMo's own evaluation also drops "and");
- unsupported: the share of answers that state something absent from every context of the question. An answer is
  unsupported when one of its content words (normalised as above, stopwords dropped) appears in none of the three
  contexts nor in the question (an inflection counts as the word: `unsupported_words`). So an answer computed from
  the context ("2022" from "last year", said in 2023) counts as unsupported too; an abstention ("not mentioned") has
  no content words beyond the stopwords and counts as supported. It measures invention, not correctness: a wrong
  answer copied from a context is supported;
- gold share: the share of the gold answer's content words the context holds (an inflection counts as the word),
  whatever the reader made of it: for a long gold answer (beam-dev's orderings and summaries) a reader of 32 tokens
  cannot reach, it says whether the context held what the answer needs;
- context tokens and reader seconds per question; the F1 ratios continuum/oracle and continuum/dense;
- continuum against dense question by question (F1): wins, losses, ties, the mean difference and its 95% bootstrap
  interval (2,000 resamples of the questions, seeded with --seed), per set and per type.

The conversations are imported through the service as bench/locomo.py does (rules-only extraction, so the figures
are about memory and retrieval, not about the reader's own extraction); --reuse-dir keeps each set's import
(DIR/imported-<set>.json) for the next run, with the same --database-url (beam-dev's import takes about 40
minutes on 2 cores).

    .venv/bin/python bench/answers.py --sets locomo,product,beam --questions 100 [--seed 7] [--budget 1000]
        [--conversations N] [--reuse-dir DIR] [--cache PATH | --no-cache] [--json out.json]

--quick: four questions of each set's first conversation (the short conversation shipped in bench/data, and the
product set's first project), read by a stand-in reader unless --base-url is given (a local server that answers with
the context line sharing the most words with the question, no model), its answers kept in the run's own folder
unless --cache is given: shows the bench runs; its figures say nothing about a model.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import locomo, product_set  # noqa: E402
from bench.django_env import report_write  # noqa: E402
from bench.scoring import (  # noqa: E402
    exact_match,
    gold_content_share,
    mean_of,
    normalize,
    paired,
    token_f1,
    unsupported_words,
)

PRODUCT_DATASET = REPO / "bench" / "data" / "product-dev.json"
BEAM_DATASET = REPO.parent / "shared" / "bench" / "beam-dev.json"
# Conversations written for this project and never tuned on (bench/data/HELDOUT.md): they confirm a change.
HELDOUT_DATASETS = {"pairs": REPO / "bench" / "data" / "heldout-pairs.json",
                    "project": REPO / "bench" / "data" / "heldout-project.json",
                    "pairs-b": REPO / "bench" / "data" / "heldout-pairs-b.json"}
SETS = {"locomo": "two-users", "product": "assistant", "beam": "assistant",  # each set's import shape
        "pairs": "two-users", "project": "assistant", "pairs-b": "two-users"}
DEFAULT_CACHE = Path.home() / ".cache" / "continuum" / "answers-cache.sqlite3"
CONDITIONS = ("continuum", "dense_baseline", "oracle")
LABELS = {"continuum": "continuum", "dense_baseline": "dense baseline", "oracle": "oracle (evidence turns)"}
READER_MAX_TOKENS = 32
READER_SYSTEM = ("You answer questions about a long conversation, using only the context given. Answer with a few "
                 "words (a name, a date, a short phrase), no explanation. If the context does not say, answer with "
                 "your best guess from it.")
_TASK_PATTERNS = [re.compile("^" + re.sub(r"\\\{[a-z0-9]+\\\}", ".+", re.escape(t)) + "$")
                  for ins in product_set.INSTRUCTIONS for t in ins["task"]]


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", default="locomo,product",
                   help="comma-separated: locomo, product, beam, and the held-out pairs, project, pairs-b "
                        "(default locomo,product)")
    p.add_argument("--locomo-dataset", default=str(locomo.DEFAULT_DATASET))
    p.add_argument("--product-dataset", default=str(PRODUCT_DATASET))
    p.add_argument("--beam-dataset", default=str(BEAM_DATASET))
    p.add_argument("--cache", default=None, metavar="PATH",
                   help=f"the reader's answers, kept by (model, request) (default {DEFAULT_CACHE}; with --quick, "
                        "a file in the run's own folder)")
    p.add_argument("--no-cache", action="store_true", help="ask the reader every time, keep nothing")
    p.add_argument("--questions", type=int, default=20, help="questions per set, sampled (seeded) by type")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--budget", type=int, default=1000, help="context tokens of Continuum and the dense baseline")
    p.add_argument("--conversations", type=int, default=0, help="only each set's first N conversations (0: all)")
    p.add_argument("--base-url", default=None, help="the reader (default: READER_BASE_URL, else the local model)")
    p.add_argument("--model", default=os.environ.get("READER_MODEL", ""), help="default: the server's first model")
    p.add_argument("--json", dest="json_path")
    p.add_argument("--database-url", default="")
    p.add_argument("--reuse-dir", default="", help="keep each set's import here for the next run (same database)")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="four questions of each set's first conversation, read by "
                   "a stand-in reader unless --base-url is given")
    p.add_argument("--variant", action="append", default=[], metavar="NAME:SETTING=VALUE[,SETTING=VALUE]",
                   help="one more Continuum context, built with these settings (a part switched off), read beside "
                        "the others; repeatable")
    args = p.parse_args(argv)
    if args.quick:
        p.set_defaults(locomo_dataset=str(locomo.QUICK_DATASET), questions=4, conversations=1)
        args = p.parse_args(argv)
        if args.base_url is None:
            args.base_url = overlap_reader_start()
    args.base_url = args.base_url or os.environ.get("READER_BASE_URL") or \
        f"http://127.0.0.1:{os.environ.get('LOCAL_MODEL_PORT', '8090')}/v1"
    args.sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    unknown = set(args.sets) - set(SETS)
    if unknown or not args.sets:
        p.error(f"--sets takes {', '.join(SETS)}; got {', '.join(sorted(unknown)) or 'none'}")
    if "beam" in args.sets and not Path(args.beam_dataset).is_file():
        p.error(f"--sets beam needs --beam-dataset (no {args.beam_dataset})")
    args.use_llm = False  # the import's extraction: rules only
    try:
        args.variants = dict(variant_parse(v) for v in args.variant)
    except ValueError as exc:
        p.error(str(exc))
    return args


def variant_parse(spec: str) -> tuple[str, dict]:
    """'no-neighbours:MEMORY_NEIGHBOUR_EXPANSION_HITS=0' -> ('no-neighbours', {setting: value}). A value is read as
    JSON where it parses (numbers, true/false), else kept as text: the settings' own types."""
    name, colon, rest = spec.partition(":")
    pairs = [item.partition("=") for item in rest.split(",") if item.strip()]
    if not colon or not name.strip() or not pairs or any(not eq or not key.strip().isupper() for key, eq, _ in pairs):
        raise ValueError(f"--variant takes NAME:SETTING=VALUE[,SETTING=VALUE] (upper-case settings); got {spec!r}")
    values = {}
    for key, _, raw in pairs:
        try:
            values[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            values[key.strip()] = raw
    return f"continuum[{name.strip()}]", values


def overlap_reader_start() -> str:
    """A stand-in reader on a spare loopback port (`overlap_reader_serve`). Returns its base URL."""
    server = overlap_reader_serve()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def overlap_reader_serve() -> ThreadingHTTPServer:
    """A stand-in reader on a spare loopback port, speaking the two OpenAI routes the bench calls: it answers with
    the context line that shares the most words with the question. The server counts the completions it was asked
    for (`completions`)."""
    lock = threading.Lock()

    class Reader(BaseHTTPRequestHandler):
        def _send(self, body: dict) -> None:
            raw = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self):
            self._send({"object": "list", "data": [{"id": "overlap-reader", "object": "model", "created": 0,
                                                    "owned_by": "bench"}]})

        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            with lock:
                self.server.completions += 1
            context = request["messages"][0]["content"].removeprefix(READER_SYSTEM)
            words = set(normalize(request["messages"][-1]["content"]))
            lines = [line.lstrip("- ") for line in context.splitlines() if line.startswith("- ")]
            best = max(lines, key=lambda line: len(words & set(normalize(line))), default="")
            self._send({"id": "quick", "object": "chat.completion", "created": 0, "model": "overlap-reader",
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": best}}]})

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Reader)
    server.completions = 0
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class AnswerCache:
    """The reader's answers kept in a SQLite file by (model, request): a rerun reads only the contexts that changed.

    The key is the SHA-256 of the model's id (as the server reports it, or --model) and the whole request body
    (messages, temperature, max_tokens), so any change to a context, the instructions or the question asks again.
    Safe to share between threads. `path` None keeps nothing (--no-cache)."""

    def __init__(self, path: Path | None):
        self.path, self.hits, self.misses = path, 0, 0
        self._lock = threading.Lock()
        self._db = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=60)
            self._db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
                             "answer TEXT NOT NULL, seconds REAL NOT NULL, created TEXT NOT NULL)")
            self._db.commit()

    @staticmethod
    def key(model: str, body: dict) -> str:
        raw = json.dumps({"model": model, "request": body}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(raw.encode()).hexdigest()

    def get(self, key: str) -> tuple[str, float] | None:
        if self._db is None:
            return None
        with self._lock:
            row = self._db.execute("SELECT answer, seconds FROM answers WHERE key = ?", (key,)).fetchone()
        return (row[0], row[1]) if row else None

    def put(self, key: str, model: str, answer: str, seconds: float) -> None:
        if self._db is None:
            return
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?)",
                             (key, model, answer, seconds, time.strftime("%Y-%m-%dT%H:%M:%S")))
            self._db.commit()

    def count(self, *, hit: bool) -> None:
        with self._lock:
            if hit:
                self.hits += 1
            else:
                self.misses += 1


def reader_answer(*, reader, cache: AnswerCache, model: str, context: str, question: str) -> tuple[str, float, bool]:
    """(answer, reader seconds, from the cache): the reader's answer to the question from the context, asked only
    when the cache does not hold it. A cached answer keeps the seconds its reading took."""
    body = {"messages": [{"role": "system", "content": f"{READER_SYSTEM}\n\n{context}" if context else READER_SYSTEM},
                         {"role": "user", "content": question}],
            "temperature": 0, "max_tokens": READER_MAX_TOKENS}
    key = AnswerCache.key(model, body)
    kept = cache.get(key)
    if kept is not None:
        cache.count(hit=True)
        return kept[0], kept[1], True
    started = time.perf_counter()
    reply = reader.chat.completions.create(model=model, **body)
    seconds = round(time.perf_counter() - started, 2)
    answer = (reply.choices[0].message.content or "").strip()
    cache.put(key, model, answer, seconds)
    cache.count(hit=False)
    return answer, seconds, False


_KIND_MARK = re.compile(r"^- \[([a-z]+)")


def lines_by_kind(context: str) -> dict[str, int]:
    """What a context holds, line by line: standing-profile entries, whole or trimmed turns, typed lines by their kind
    ("[preference] ..."), session-note lines and neighbouring turns shown under a hit ("  context: ...")."""
    counts: dict[str, int] = {}
    in_profile = False
    for line in context.splitlines():
        if line.startswith("Standing "):
            in_profile = True
            continue
        if line.startswith("  context:"):
            kind = "neighbour"
        elif not line.startswith("- "):
            in_profile = False
            continue
        elif in_profile:
            kind = "profile"
        else:
            m = _KIND_MARK.match(line)
            kind = m.group(1) if m and m.group(1) in _TYPED else "turn"
        counts[kind] = counts.get(kind, 0) + 1
    return counts


_TYPED = frozenset({"preference", "fact", "goal", "procedure", "note"})


def is_task_probe(question: str) -> bool:
    """A product-set standing question that is a task the instruction governs, not a question about it."""
    return any(p.match(question) for p in _TASK_PATTERNS)


def stratified_sample(pool: list, n: int, seed: int, key) -> list:
    """n items of the pool, each stratum (key) getting its share in proportion to its size (largest remainders),
    at least one each while n allows; seeded per stratum, in stratum order."""
    strata: dict[str, list] = {}
    for item in pool:
        strata.setdefault(key(item), []).append(item)
    names, n = sorted(strata), min(n, len(pool))
    if not n:
        return []
    share = {s: n * len(strata[s]) / len(pool) for s in names}
    quota = {s: int(share[s]) for s in names}
    for s in sorted(names, key=lambda s: share[s] - quota[s], reverse=True)[: n - sum(quota.values())]:
        quota[s] += 1
    if n >= len(names):
        for s in names:
            if not quota[s]:
                quota[max(names, key=lambda t: quota[t])] -= 1
                quota[s] = 1
    # Each stratum shuffled by a generator of its own and its quota taken from the front: a stratum's draws do not
    # depend on the others' quotas, and a larger n keeps the questions a smaller one drew wherever a quota grows.
    out = []
    for s in names:
        random.Random(f"{seed}:{s}").shuffle(strata[s])
        out += strata[s][: quota[s]]
    return out


class Conversation:
    """A conversation's turns as the product's memories of them would read: one episodic memory per whole turn
    (context.composer renders them), its dense index, and its turns by dia_id."""

    def __init__(self, conv: dict, embedder):
        import numpy as np

        from memory.extraction.rules import resolve_dates
        from memory.retrieval import RetrievedMemory

        self.turns, self.by_dia = [], {}
        user_speaker = conv["speaker_a"]
        for ordinal, (_, started, turns) in enumerate(locomo.sessions_of(conv), start=1):
            for i, t in enumerate(turns):
                said_at = started + timedelta(seconds=30 * i)  # as bench/locomo.py's import dates each message
                content = locomo.turn_content(t)
                m = RetrievedMemory(memory_id=t["dia_id"], kind="event", text=f"{t['speaker']}: {content}", score=0.0,
                                    source_type="user_stated" if t["speaker"] == user_speaker else "assistant",
                                    created_at=said_at, session_id=None, source_message_id=None, provenance="",
                                    session_number=ordinal, dates=resolve_dates(content, said_at))
                self.turns.append(m)
                self.by_dia[t["dia_id"]] = m
        self.matrix = np.array(embedder.embed([m.text for m in self.turns]), dtype=np.float32)

    def dense(self, question: str, budget: int, embedder) -> list:
        """Turns best-first by cosine, each that still fits the rendered section's budget (a long turn that does not
        fit is passed over, not the end of the list: a long message must not leave the baseline empty)."""
        import numpy as np

        from context.budget import memory_section_allowance
        from memory.rendering import BlockBudget

        block, out = BlockBudget(memory_section_allowance(budget)), []
        for i in np.argsort(-(self.matrix @ np.array(embedder.embed([question])[0], dtype=np.float32))):
            cost = block.cost(self.turns[i])
            if not block.fits(cost):
                continue
            block.add(self.turns[i], cost)
            out.append(self.turns[i])
        return out

    def evidence(self, dia_ids: list[str]) -> list:
        return [self.by_dia[d] for d in dict.fromkeys(dia_ids) if d in self.by_dia]


def _run_set(name: str, args, reader, model_of, workdir: Path, cache: AnswerCache) -> dict:
    from django.test import override_settings

    from context.memory_section import memory_section_text
    from infra.embedder import get_embedder
    from infra.tokens import count_tokens

    conditions = (*CONDITIONS, *args.variants)

    path = Path({"locomo": args.locomo_dataset, "product": args.product_dataset, "beam": args.beam_dataset,
                 **HELDOUT_DATASETS}[name])
    data = json.loads(path.read_text())
    if args.conversations:
        data = data[: args.conversations]
    embedder = get_embedder()
    embedder.caching = True
    tenant, users_by_sample, import_seconds = locomo.import_or_reuse(
        data=data, shape=SETS[name], marker=workdir / f"imported-{name}.json" if args.reuse_dir else None,
        tenant_name=f"Answers bench: {name}")
    pool = [(s, qa) for s in data for qa in s["qa"]
            if qa.get("category") in locomo.CATEGORIES and qa.get("evidence") and str(qa.get("answer", "")).strip()
            and not is_task_probe(qa["question"])]
    sample = stratified_sample(pool, args.questions, args.seed, key=lambda item: locomo.question_type(item[1]))
    model = model_of() if sample else ""
    conversations: dict[str, Conversation] = {}
    rows = []
    hits_before, misses_before = cache.hits, cache.misses
    started_run = time.perf_counter()
    for n, (s, qa) in enumerate(sample, start=1):
        if s["sample_id"] not in conversations:
            conversations[s["sample_id"]] = Conversation(s["conversation"], embedder)
        embedder.caching = False  # every question's embedding is computed, as a turn's would be
        conv = conversations[s["sample_id"]]
        question, gold = qa["question"], str(qa["answer"])
        users = list(users_by_sample[s["sample_id"]].values())
        contexts = {
            "continuum": locomo.budget_context(tenant=tenant, users=users, question=question, budget=args.budget).text,
            "dense_baseline": memory_section_text(conv.dense(question, args.budget, embedder)),
            "oracle": memory_section_text(conv.evidence(qa["evidence"])),
        }
        for variant, values in args.variants.items():
            with override_settings(**values):
                contexts[variant] = locomo.budget_context(tenant=tenant, users=users, question=question,
                                                          budget=args.budget).text
        embedder.caching = True
        row = {"sample": s["sample_id"], "question": question, "gold": gold, "type": locomo.question_type(qa)}
        for condition, context in contexts.items():
            answer, seconds, cached = reader_answer(reader=reader, cache=cache, model=model, context=context,
                                                    question=question)
            # Judged against the three standing contexts and its own, so a run with variants scores the three as a
            # run without them does.
            seen = [*(contexts[c] for c in CONDITIONS), *([context] if condition not in CONDITIONS else []), question]
            missing = unsupported_words(answer, seen)
            row[condition] = {"answer": answer, "f1": token_f1(answer, gold),
                              "em": exact_match(answer, gold), "unsupported": bool(missing),
                              "unsupported_words": missing, "gold_share": gold_content_share(gold, context),
                              "tokens": count_tokens(context) if context else 0, "seconds": seconds,
                              "lines": lines_by_kind(context),
                              "cached": cached}
        row["contexts"] = contexts  # what the reader saw: kept in --json for reading the answers against
        rows.append(row)
        print(f"[{name} {n}/{len(sample)}] ({row['type']}) {question} | gold: {gold} | " +
              " | ".join(f"{c}: {row[c]['answer']}" for c in conditions), flush=True)
    wall = time.perf_counter() - started_run

    def figures(subset: list[dict]) -> dict:
        return {c: {"token_f1": round(statistics.mean(r[c]["f1"] for r in subset), 3),
                    "exact_match": round(statistics.mean(r[c]["em"] for r in subset), 3),
                    "unsupported": round(statistics.mean(r[c]["unsupported"] for r in subset), 3),
                    "gold_content_share": _rounded(mean_of(r[c]["gold_share"] for r in subset)),
                    "context_tokens_mean": round(statistics.mean(r[c]["tokens"] for r in subset), 1),
                    "lines_mean": {k: round(sum(r[c]["lines"].get(k, 0) for r in subset) / len(subset), 1)
                                   for k in sorted({k for r in subset for k in r[c]["lines"]})},
                    "reader_seconds_mean": round(statistics.mean(r[c]["seconds"] for r in subset), 2)}
                for c in conditions} if subset else {}

    overall = figures(rows)

    def ratio(a: str, b: str, key: str = "f1") -> float | None:
        over = sum(r[b][key] for r in rows)  # from the unrounded sums: the means' rounding would show in a ratio
        return round(sum(r[a][key] for r in rows) / over, 3) if rows and over else None

    def against_dense(subset: list[dict], condition: str = "continuum", other: str = "dense_baseline") -> dict:
        pair = paired([r[condition]["f1"] for r in subset], [r[other]["f1"] for r in subset], seed=args.seed)
        return {**pair, "mean_difference": _rounded(pair["mean_difference"]),
                "ci95": [round(x, 3) for x in pair["ci95"]] if pair["ci95"] else None}

    types = sorted({r["type"] for r in rows})
    return {
        "set": name, "dataset": str(path), "shape": SETS[name], "conversations": len(data),
        "questions": len(rows), "pool": len(pool), "reader": model, "budget_tokens": args.budget,
        "import_seconds": round(import_seconds, 1), "questions_wall_seconds": round(wall, 1),
        "seconds_per_question": round(wall / len(rows), 1) if rows else 0.0,
        "reader_calls": cache.misses - misses_before, "answers_from_cache": cache.hits - hits_before,
        **overall,
        "f1_continuum_vs_dense": against_dense(rows),
        "variants": {v: {"settings": args.variants[v], "f1_over_continuum": ratio(v, "continuum"),
                         "f1_over_dense": ratio(v, "dense_baseline"),
                         "f1_vs_continuum": against_dense(rows, v, "continuum")} for v in args.variants},
        "ratios": {"f1_continuum_over_oracle": ratio("continuum", "oracle"),
                   "f1_continuum_over_dense": ratio("continuum", "dense_baseline"),
                   "em_continuum_over_oracle": ratio("continuum", "oracle", "em"),
                   "em_continuum_over_dense": ratio("continuum", "dense_baseline", "em")},
        "by_type": {t: {"questions": sum(r["type"] == t for r in rows), **figures([r for r in rows if r["type"] == t]),
                        "f1_continuum_vs_dense": against_dense([r for r in rows if r["type"] == t])}
                    for t in types},
        "answers": rows,
    }


def _rounded(x: float | None, places: int = 3) -> float | None:
    return None if x is None else round(x, places)


def _print(r: dict) -> None:
    print(f"\nanswers, {r['set']} set ({r['shape']} shape): {r['questions']} questions (of {r['pool']}) from "
          f"{r['conversations']} conversations, reader {r['reader']}, budget {r['budget_tokens']} tokens, "
          f"{r['seconds_per_question']} s per question")
    if not r["questions"]:
        return
    print(f"reader answers: {r['reader_calls'] + r['answers_from_cache']}, of them {r['answers_from_cache']} from "
          f"the cache and {r['reader_calls']} read now")

    def shown(x, places: int = 3):
        return "n/a" if x is None else f"{x:.{places}f}"

    conditions = (*CONDITIONS, *r.get("variants", {}))
    print(f"{'context':26}{'token F1':>10}{'EM':>8}{'unsupported':>13}{'gold share':>12}{'tokens':>9}"
          f"{'reader s/q':>12}")
    for c in conditions:
        f = r[c]
        print(f"{LABELS.get(c, c):26}{f['token_f1']:>10.3f}{f['exact_match']:>8.3f}{f['unsupported']:>13.3f}"
              f"{shown(f['gold_content_share']):>12}{f['context_tokens_mean']:>9.1f}{f['reader_seconds_mean']:>12.2f}")
    for c in conditions:
        print(f"  lines per context, {LABELS.get(c, c)}: " +
              (", ".join(f"{k} {v}" for k, v in r[c]["lines_mean"].items()) or "none"))
    q = r["ratios"]
    print(f"F1 continuum/oracle {shown(q['f1_continuum_over_oracle'])}, "
          f"F1 continuum/dense {shown(q['f1_continuum_over_dense'])}; "
          f"EM continuum/oracle {shown(q['em_continuum_over_oracle'])}, "
          f"EM continuum/dense {shown(q['em_continuum_over_dense'])}")
    d = r["f1_continuum_vs_dense"]
    print(f"F1 continuum vs dense, question by question: {d['wins']} wins, {d['losses']} losses, {d['ties']} ties; "
          f"mean difference {d['mean_difference']:+.3f} (95% bootstrap interval {d['ci95'][0]:+.3f} to "
          f"{d['ci95'][1]:+.3f})")
    for v, f in r.get("variants", {}).items():
        d = f["f1_vs_continuum"]
        print(f"{v} ({', '.join(f'{k}={x}' for k, x in f['settings'].items())}): F1 / continuum "
              f"{shown(f['f1_over_continuum'])}, F1 / dense {shown(f['f1_over_dense'])}; against continuum "
              f"{d['wins']} wins, {d['losses']} losses, mean {d['mean_difference']:+.3f} "
              f"({d['ci95'][0]:+.3f} to {d['ci95'][1]:+.3f})")
    print("by type, continuum / dense / oracle: F1 (unsupported; gold share) wins-losses-ties against dense, "
          "questions:")
    for t, f in r["by_type"].items():
        d = f["f1_continuum_vs_dense"]
        print(f"  {t:24} " + " / ".join(f"{f[c]['token_f1']:.3f}" for c in CONDITIONS) +
              "  (" + " / ".join(f"{f[c]['unsupported']:.2f}" for c in CONDITIONS) +
              "; " + " / ".join(shown(f[c]["gold_content_share"], 2) for c in CONDITIONS) +
              f")  {d['wins']}-{d['losses']}-{d['ties']}, {f['questions']}" +
              "".join(f"; {v} {f[v]['token_f1']:.3f}" for v in r.get("variants", {})))


def main(argv=None) -> dict:
    args = _args(argv)
    import openai

    reader = openai.OpenAI(base_url=args.base_url, api_key="not-needed", timeout=600, max_retries=0)
    workdir = Path(args.reuse_dir).resolve() if args.reuse_dir else Path(tempfile.mkdtemp(prefix="answers-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    locomo._setup_django(args, workdir)

    import torch

    from infra.embedder import get_embedder, set_embedder

    torch.set_num_threads(max(1, args.torch_threads))
    set_embedder(locomo.CachingEmbedder(get_embedder()))
    chosen = []

    def model_of() -> str:
        if not chosen:
            chosen.append(args.model or reader.models.list().data[0].id)
        return chosen[0]

    if args.no_cache:
        cache = AnswerCache(None)
    else:
        cache = AnswerCache(Path(args.cache) if args.cache else
                            workdir / "answers-cache.sqlite3" if args.quick else DEFAULT_CACHE)
    started = time.perf_counter()
    results = {}
    for name in args.sets:
        results[name] = _run_set(name, args, reader, model_of, workdir, cache)
        _print(results[name])
    print(f"\nreader answers, all sets: {cache.hits + cache.misses}, of them {cache.hits} from the cache "
          f"({cache.path or 'off'}) and {cache.misses} read now")
    result = {"command": " ".join(["bench/answers.py", *(argv if argv is not None else sys.argv[1:])]),
              "date": time.strftime("%Y-%m-%d"), "seed": args.seed, "budget_tokens": args.budget,
              "wall_seconds": round(time.perf_counter() - started, 1),
              "cache": str(cache.path) if cache.path else None, "reader_calls": cache.misses,
              "answers_from_cache": cache.hits, "sets": results}
    report_write(result, args.json_path, ensure_ascii=False)
    return result


if __name__ == "__main__":
    main()
