"""LoCoMo answers: one fixed reader model answers sampled questions from three contexts, side by side in one run.

The contexts, each for the same questions: Continuum's memories as a turn's context gets them (retrieval over both
speakers with a 1,000-token memory budget, each memory with its provenance line), the plain dense baseline at the
same budget (raw "Speaker: text" turns best-first by cosine while they fit), and the question's own evidence turns
(the upper bound: what a perfect retriever would hand over). The reader is the model at --base-url (by default the
local llama-server of scripts/local_model.py), temperature 0, a short answer. Scored by token F1 and exact match
against the gold answer (SQuAD normalisation), with context tokens and reader seconds per question.

The conversations are imported through the service as bench/locomo.py does (rules-only extraction, so the figures
are about retrieval, not about the reader's own extraction); --reuse-dir keeps the import for the next run.

    .venv/bin/python bench/answers.py --questions 20 [--conversations 1] [--seed 7] [--json out.json]

--quick: four questions of the short conversation shipped in bench/data, read by a stand-in reader unless --base-url
is given (a local server that answers with the context line sharing the most words with the question, no model):
seconds, to show the bench runs; its figures say nothing about a model.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import string
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import locomo  # noqa: E402

MEMORY_BUDGET = 1000
READER_MAX_TOKENS = 32
READER_SYSTEM = ("You answer questions about a long conversation between two people, using only the context given. "
                 "Answer with a few words (a name, a date, a short phrase), no explanation. If the context does not "
                 "say, answer with your best guess from it.")


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dataset", nargs="?", default=str(locomo.DEFAULT_DATASET))
    p.add_argument("--questions", type=int, default=20, help="questions sampled (seeded) from categories 1-4")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--conversations", type=int, default=1, help="only the first N conversations (0: all)")
    p.add_argument("--base-url", default=None, help="the reader (default: READER_BASE_URL, else the local model)")
    p.add_argument("--model", default=os.environ.get("READER_MODEL", ""), help="default: the server's first model")
    p.add_argument("--json", dest="json_path")
    p.add_argument("--database-url", default="")
    p.add_argument("--reuse-dir", default="")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="four questions of the conversation in bench/data, read by "
                   "a stand-in reader unless --base-url is given")
    args = p.parse_args(argv)
    if args.quick:
        p.set_defaults(dataset=str(locomo.QUICK_DATASET), questions=4)
        args = p.parse_args(argv)
        if args.base_url is None:
            args.base_url = overlap_reader_start()
    args.base_url = args.base_url or os.environ.get("READER_BASE_URL") or \
        f"http://127.0.0.1:{os.environ.get('LOCAL_MODEL_PORT', '8090')}/v1"
    args.use_llm = False  # the import's extraction: rules only
    return args


def overlap_reader_start() -> str:
    """A stand-in reader on a spare loopback port, speaking the two OpenAI routes the bench calls: it answers with
    the context line that shares the most words with the question. Returns its base URL."""

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
            prompt = request["messages"][-1]["content"]
            context, _, question = prompt.partition("\n\nQuestion: ")
            words = set(normalize(question))
            lines = [line for line in context.splitlines()[1:] if line.strip()]
            best = max(lines, key=lambda line: len(words & set(normalize(line))), default="")
            self._send({"id": "quick", "object": "chat.completion", "created": 0, "model": "overlap-reader",
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": best}}]})

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Reader)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def normalize(text: str) -> list[str]:
    text = str(text).lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the|and)\b", " ", text)
    return text.split()


def token_f1(prediction: str, gold: str) -> float:
    p, g = normalize(prediction), normalize(gold)
    common = sum((Counter(p) & Counter(g)).values())
    if not p or not g or not common:
        return float(p == g)
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize(prediction) == normalize(gold))


def main(argv=None) -> dict:
    args = _args(argv)
    import openai

    reader = openai.OpenAI(base_url=args.base_url, api_key="not-needed", timeout=120, max_retries=0)
    data = json.loads(Path(args.dataset).read_text())
    if args.conversations:
        data = data[: args.conversations]
    workdir = Path(args.reuse_dir).resolve() if args.reuse_dir else Path(tempfile.mkdtemp(prefix="answers-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    marker = workdir / "imported.json"
    locomo._setup_django(args, workdir)

    import numpy as np

    from infra.embedder import get_embedder
    from infra.tokens import count_tokens
    from memory.retrieval import memory_retrieve_for_users
    from tenants.models import EndUser, Tenant
    from tenants.services import tenant_create

    reused = locomo._reused_import(marker, data, Tenant, EndUser, "two-users") if args.reuse_dir else None
    if reused:
        tenant, users_by_sample, _ = reused
    else:
        tenant = tenant_create(name="LoCoMo answers", slug=f"answers-{uuid.uuid4().hex[:6]}",
                               memory_ttl_days={"event": None, "goal": None})
        started = time.perf_counter()
        users_by_sample = {s["sample_id"]: locomo.import_sample(s, tenant) for s in data}
        print(f"imported {len(data)} conversation(s) in {time.perf_counter() - started:.0f} s", flush=True)
        if args.reuse_dir:
            marker.write_text(json.dumps({
                "tenant_id": str(tenant.pk), "samples": [s["sample_id"] for s in data], "import_seconds": 0.0,
                "users": {sid: {name: str(u.pk) for name, u in users.items()}
                          for sid, users in users_by_sample.items()}}))

    pool = [(s, qa) for s in data for qa in s["qa"]
            if qa.get("category") in locomo.CATEGORIES and qa.get("evidence") and "answer" in qa]
    sample = random.Random(args.seed).sample(pool, min(args.questions, len(pool)))
    model = (args.model or reader.models.list().data[0].id) if sample else ""
    embedder = get_embedder()
    indexes = {}
    conditions = ("continuum", "dense_baseline", "evidence")
    scores = {c: {"f1": [], "em": [], "tokens": [], "seconds": []} for c in conditions}
    rows = []
    for n, (s, qa) in enumerate(sample, start=1):
        conv = s["conversation"]
        if s["sample_id"] not in indexes:
            turns = [t for _, _, ts in locomo.sessions_of(conv) for t in ts]
            lines = [f"{t['speaker']}: {locomo.turn_content(t)}" for t in turns]
            indexes[s["sample_id"]] = (turns, lines, np.array(embedder.embed(lines), dtype=np.float32),
                                       [count_tokens(x) for x in lines])
        turns, lines, matrix, line_tokens = indexes[s["sample_id"]]
        question, gold = qa["question"], str(qa["answer"])
        users = list(users_by_sample[s["sample_id"]].values())
        memories = memory_retrieve_for_users(tenant=tenant, users=users, query=question, k=1000,
                                             token_budget=MEMORY_BUDGET, record_access=False)
        order = np.argsort(-(matrix @ np.array(embedder.embed([question])[0], dtype=np.float32)))
        dense, used = [], 0
        for i in order:
            if used + line_tokens[i] > MEMORY_BUDGET:
                break
            used += line_tokens[i]
            dense.append(lines[i])
        by_dia = {t["dia_id"]: line for t, line in zip(turns, lines)}
        contexts = {
            "continuum": "\n".join(f"- {m.text} ({m.provenance})" for m in memories),
            "dense_baseline": "\n".join(dense),
            "evidence": "\n".join(by_dia[d] for d in qa["evidence"] if d in by_dia),
        }
        row = {"question": question, "gold": gold, "category": qa["category"]}
        for condition, context in contexts.items():
            started = time.perf_counter()
            reply = reader.chat.completions.create(
                model=model, temperature=0, max_tokens=READER_MAX_TOKENS,
                messages=[{"role": "system", "content": READER_SYSTEM},
                          {"role": "user", "content": f"Context:\n{context}\n\nQuestion: {question}"}])
            seconds = time.perf_counter() - started
            answer = (reply.choices[0].message.content or "").strip()
            scores[condition]["f1"].append(token_f1(answer, gold))
            scores[condition]["em"].append(exact_match(answer, gold))
            scores[condition]["tokens"].append(count_tokens(context))
            scores[condition]["seconds"].append(seconds)
            row[condition] = answer
        rows.append(row)
        print(f"[{n}/{len(sample)}] {question} | gold: {gold} | " +
              " | ".join(f"{c}: {row[c]}" for c in conditions), flush=True)

    result = {
        "dataset": args.dataset, "conversations": len(data), "questions": len(sample), "seed": args.seed,
        "reader": model, "memory_budget_tokens": MEMORY_BUDGET,
        **{c: {"token_f1": round(statistics.mean(v["f1"]), 3), "exact_match": round(statistics.mean(v["em"]), 3),
               "context_tokens_mean": round(statistics.mean(v["tokens"]), 1),
               "reader_seconds_mean": round(statistics.mean(v["seconds"]), 2)}
           for c, v in scores.items() if v["f1"]},
        "answers": rows,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "answers"}, indent=2))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
