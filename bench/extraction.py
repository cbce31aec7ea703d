"""LoCoMo extraction: stored memories against the dataset's gold observations, rules only vs with the local model.

LoCoMo annotates each session with `observation`s: per speaker, gold facts each with the `dia_id` of the turn that
states it. The first --sessions sessions of the first conversation are imported through the service as
bench/locomo.py imports them (one end user per speaker; the speaker's turns are that user's messages), once with
rules-only extraction and once with the model at --base-url, each into its own tenant. Then:

Extraction's memories are the stored ones other than events (the user's own words) and session notes (written at
close from the turns):

- gold recall: the share of gold facts matched by an extraction memory drawn from the same turn (its source message
  is the fact's dia_id) whose embedding cosine to the fact is at least --threshold;
- precision: the share of extraction memories whose cosine to some gold fact of their session and speaker is at
  least --threshold;
- memories per message (extraction memories per user message);
- the bridge written at close (extractive without the model, abstractive with it): the share of the session's gold
  facts of that speaker with cosine >= --threshold to one of its sentences.

The threshold is fixed in advance (it is not fitted to this data); the embedder is the service's own.

    .venv/bin/python bench/extraction.py --sessions 2 [--threshold 0.6] [--json out.json]
    .venv/bin/python bench/extraction.py bench/data/product-dev.json --shape assistant --sessions 4

--quick: the short conversation shipped in bench/data, rules only unless --base-url is given (seconds: shows the
bench runs, not its figures).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import locomo  # noqa: E402
from bench.django_env import report_write  # noqa: E402


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dataset", nargs="?", default=str(locomo.DEFAULT_DATASET))
    p.add_argument("--sessions", type=int, default=2, help="the first N sessions of the first conversation")
    p.add_argument("--shape", choices=("two-users", "assistant"), default="two-users",
                   help="as bench/locomo.py: 'assistant' imports the first speaker as the one end user and the other "
                   "as the assistant (the product-shaped set)")
    p.add_argument("--threshold", type=float, default=0.6, help="cosine at which a memory matches a gold fact")
    p.add_argument("--base-url", default=None, help="the model (default: READER_BASE_URL, else the local model)")
    p.add_argument("--no-llm", action="store_true", help="rules only (no model pass)")
    p.add_argument("--quick", action="store_true", help="the short conversation in bench/data, rules only unless "
                   "--base-url is given")
    p.add_argument("--json", dest="json_path")
    p.add_argument("--dump", default="", metavar="FILE",
                   help="also write every stored memory with its nearest gold fact, and every gold fact with whether "
                   "it was matched, so what lowers precision or recall can be read")
    p.add_argument("--database-url", default="")
    p.add_argument("--torch-threads", type=int, default=1)
    args = p.parse_args(argv)
    if args.quick:
        args.dataset, args.no_llm = str(locomo.QUICK_DATASET), args.no_llm or args.base_url is None
    args.base_url = args.base_url or os.environ.get("READER_BASE_URL") or \
        f"http://127.0.0.1:{os.environ.get('LOCAL_MODEL_PORT', '8090')}/v1"
    args.use_llm = False  # settings start without a model; the model pass switches it on
    args.reuse_dir = ""
    return args


def _import(sample: dict, tenant, sessions: int, shape: str = "two-users") -> dict:
    """The first sessions of one conversation through the service (bench/locomo.import_sample), each closed: the
    stored sessions under (dataset session number, speaker)."""
    opened: dict = {}
    locomo.import_sample(sample, tenant, shape, sessions=sessions, opened=opened)
    return opened


# Not extraction's output: events are the user's own words, session notes are written at close from the turns.
EXCLUDED_KINDS = ("event", "note")


def _unit(vectors):
    import numpy as np

    m = np.array(vectors, dtype=np.float32)
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9)


def _score(sample: dict, tenant, opened: dict, threshold: float, dump: list | None = None) -> dict:
    from context.models import BridgeSummary
    from infra.embedder import get_embedder
    from memory.models import MemoryRecord
    from sessions.models import Message

    embed = get_embedder().embed
    recall, precision, bridge_cover, per_message = [], [], [], []
    bridge_kinds = set()
    for (number, name), session in opened.items():
        gold = sample["observation"].get(f"session_{number}_observation", {}).get(name, [])
        if not gold:
            continue
        gold_texts = [g[0] for g in gold]
        gold_m = _unit(embed(gold_texts))
        memories = list(MemoryRecord.objects.unscoped().filter(tenant=tenant, session=session)
                        .exclude(kind__in=EXCLUDED_KINDS).select_related("source_message"))
        user_messages = Message.objects.unscoped().filter(session=session, role="user").count()
        per_message.append(len(memories) / max(1, user_messages))
        mem_m = _unit(embed([m.text for m in memories])) if memories else None
        for gi, (_, dia) in enumerate(gold):
            dia_ids = {d.strip() for d in str(dia).split(";")}
            same_turn = [mi for mi, m in enumerate(memories)
                         if m.source_message is not None and m.source_message.external_id in dia_ids]
            recall.append(float(any(float(mem_m[mi] @ gold_m[gi]) >= threshold for mi in same_turn)))
            if dump is not None:
                dump.append({"session": number, "speaker": name, "gold": gold_texts[gi], "dia_id": dia,
                             "matched": bool(recall[-1])})
        if memories:
            sims = mem_m @ gold_m.T
            precision += [float(row.max() >= threshold) for row in sims]
            if dump is not None:
                dump += [{"session": number, "speaker": name, "memory": m.text, "kind": m.kind,
                          "source": m.source_type, "extractor": m.extractor,
                          "turn": m.source_message.external_id if m.source_message else "",
                          "cosine": round(float(row.max()), 3), "nearest_gold": gold_texts[int(row.argmax())]}
                         for m, row in zip(memories, sims, strict=True)]
        bridge = BridgeSummary.objects.unscoped().filter(session=session).first()
        if bridge is not None:
            bridge_kinds.add(bridge.method)
            sentences = [s for s in re.split(r"(?<=[.!?])\s+", bridge.text) if s.strip()]
            sims = _unit(embed(sentences)) @ gold_m.T
            bridge_cover += [float(col.max() >= threshold) for col in sims.T]
    mean = lambda v: round(statistics.mean(v), 3) if v else None  # noqa: E731
    return {"gold_facts": len(recall), "gold_recall": mean(recall), "stored_non_event_memories": len(precision),
            "precision": mean(precision), "memories_per_message": mean(per_message),
            "bridge_kind": sorted(bridge_kinds), "bridge_gold_coverage": mean(bridge_cover)}


def main(argv=None) -> dict:
    args = _args(argv)
    sample = json.loads(Path(args.dataset).read_text())[0]
    workdir = Path(tempfile.mkdtemp(prefix="extraction-bench-"))
    locomo._setup_django(args, workdir)
    from django.conf import settings

    from infra import llm
    from tenants.services import tenant_create

    result = {"dataset": args.dataset, "sample": sample["sample_id"], "sessions": args.sessions,
              "threshold": args.threshold}
    modes = ["rules"] + ([] if args.no_llm else ["llm"])
    for mode in modes:
        if mode == "llm":
            import openai

            probe = openai.OpenAI(base_url=args.base_url, api_key="not-needed", timeout=10, max_retries=0)
            settings.LLM_BASE_URL, settings.LLM_MODEL = args.base_url, probe.models.list().data[0].id
            from infra.local_profile import profile_apply

            profile_apply(settings)  # the model configured as scripts/run configures it
            llm._client.cache_clear()
            result["model"] = settings.LLM_MODEL
        tenant = tenant_create(name=f"extraction {mode}", slug=f"extraction-{mode}-{uuid.uuid4().hex[:6]}",
                               memory_ttl_days={"event": None, "goal": None})
        started = time.perf_counter()
        opened = _import(sample, tenant, args.sessions, args.shape)
        dump = [] if args.dump else None
        result[mode] = {"import_seconds": round(time.perf_counter() - started, 1),
                        **_score(sample, tenant, opened, args.threshold, dump)}
        if dump is not None:
            Path(f"{args.dump}.{mode}.json").write_text(json.dumps(dump, indent=1, ensure_ascii=False))
        print(mode, json.dumps(result[mode]), flush=True)
    print(json.dumps(result, indent=2))
    report_write(result, args.json_path)
    return result


if __name__ == "__main__":
    main()
