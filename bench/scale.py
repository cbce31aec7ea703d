"""Retrieval at scale: one Edge shard filled with realistic memories at growing sizes, searched by one user's scope.

    .venv/bin/python bench/scale.py [--sizes 1000,10000,100000] [--big-user 10000] [--queries 100]

The shard grows in steps to each size; at each size it prints, for the user holding the most memories (--big-user,
at most half the shard) and for users of ordinary size, p50/p95 over --queries LoCoMo questions of: the store's own
hybrid search (dense + BM25 fused by RRF, tenant + user + status filter, k = 10) and the searches retrieval really
makes (keywords, then dense, at the candidates limit; the keyword one also alone), each beside the floor at the same
size (one dense search under the same filter); and the same searches with the query's embedding, as retrieval runs
them, beside a floor that embeds too (see `_timed_searches`). Also memory per point (the process's resident memory
and the shard's folder on disk, each grown over the fill, divided by the points added).

Realistic points: LoCoMo dev turns embedded by the service's embedder (a pool), each point a pool turn's text with
its vector moved a little (Gaussian noise, renormalised, cosine ~0.93 to the turn's) so no two points are equal;
many tenants, users' sizes uneven (Zipf-like), one big user. Queries are LoCoMo questions, embedded once: the
figures are the store's, not the embedder's. Measured on Qdrant Edge only; see docs/benchmarks-changelog.md for what
carries to a server.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _pct(values, q):
    values = sorted(values)
    return values[max(0, min(len(values) - 1, int(round(q / 100 * (len(values) - 1)))))]


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _disk_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


TIMED = {
    "hybrid": "hybrid (the store's own fusion, k 10)",
    "floor": "floor (one dense search, k 10)",
    "searches": "retrieval's searches (keywords, then dense, k = candidates)",
    "keywords": "of which the keyword search",
    "retrieval": "with the query's embedding, as retrieval runs them",
    "embedded floor": "floor with its embedding",
}


def _timed_searches(store, scope, text, dense, *, candidates: int, tag: str):
    """(key of TIMED, seconds) for one question. Retrieval asks the store for its keyword candidates while the query
    is embedded, then for its dense candidates (memory/retrieval/retrieve.py `_candidates`), each search at the
    candidates limit and fused by the service, not the store. The embedded runs embed a text of their own (the
    question with a tag), so the embedder's cache of recent texts answers neither."""
    from infra.embedder import embed_soon, get_embedder
    from infra.vector_store.base import Search
    from memory.retrieval.ranking import HIT_PAYLOAD_KEYS

    def ask(**kw):
        return Search(scope, limit=candidates, payload_keys=HIT_PAYLOAD_KEYS, not_expired_at=time.time(), **kw)

    t0 = time.perf_counter()
    store.search(scope, dense=dense, text=text, limit=10)
    yield "hybrid", time.perf_counter() - t0
    t0 = time.perf_counter()
    store.search(scope, dense=dense, limit=10)
    yield "floor", time.perf_counter() - t0
    t0 = time.perf_counter()
    store.search_batch([ask(text=text)])
    t1 = time.perf_counter()
    store.search_batch([ask(dense=dense)])
    yield "searches", time.perf_counter() - t0
    yield "keywords", t1 - t0
    t0 = time.perf_counter()
    pending = embed_soon([f"{text} ({tag}a)"])
    store.search_batch([ask(text=text)])
    store.search_batch([ask(dense=pending.result()[0])])
    yield "retrieval", time.perf_counter() - t0
    t0 = time.perf_counter()
    store.search(scope, dense=get_embedder().embed([f"{text} ({tag}b)"])[0], limit=10)
    yield "embedded floor", time.perf_counter() - t0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,10000,100000")
    p.add_argument("--big-user", type=int, default=10_000)
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--pool", type=int, default=1500, help="LoCoMo turns embedded for the points' texts and vectors")
    p.add_argument("--tenants", type=int, default=50)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--quick", action="store_true", help="seconds, on tiny sizes: checks the bench still runs")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.big_user, args.queries, args.pool, args.tenants = "300", 100, 10, 100, 5
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    workdir = Path(tempfile.mkdtemp(prefix="continuum-scale-"))
    os.environ["CONTINUUM_VAR_DIR"] = str(workdir)
    os.environ["QDRANT_URL"] = ""
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    import numpy as np
    from django.conf import settings

    from infra.embedder import get_embedder
    from infra.vector_store import MemoryPoint, Scope
    from infra.vector_store.edge import EdgeVectorStore

    rng = random.Random(args.seed)
    nrng = np.random.default_rng(args.seed)
    # The dev set beside the repository, else the one it ships.
    from bench.locomo import DEFAULT_DATASET, turns_and_questions

    turns, questions = turns_and_questions(json.loads(Path(DEFAULT_DATASET).read_text()))
    rng.shuffle(turns)
    rng.shuffle(questions)
    embedder = get_embedder()
    t = time.perf_counter()
    pool_text = turns[:args.pool]
    pool = np.array(embedder.embed(pool_text), dtype=np.float32)
    queries = [(q, embedder.embed([q])[0]) for q in questions[:args.queries]]
    print(f"embedded a pool of {len(pool_text)} turns and {len(queries)} questions in {time.perf_counter() - t:.0f} s",
          flush=True)

    sizes = sorted(int(s) for s in args.sizes.split(","))
    tenants = [str(uuid.uuid4()) for _ in range(args.tenants)]
    big = (tenants[0], str(uuid.uuid4()))
    # Ordinary users: 1-2,000 memories each, most small (a Pareto draw), spread over the tenants.
    ordinary: list[tuple[str, str, int]] = []

    def next_user():
        return (rng.choice(tenants), str(uuid.uuid4()), max(1, min(2000, int(rng.paretovariate(1.2) * 20))))

    store_dir = workdir / "shard"
    store = EdgeVectorStore(store_dir, dim=settings.EMBEDDING_DIM)
    candidates = settings.MEMORY_RETRIEVAL_CANDIDATES
    store.ensure_collection()
    filled = big_filled = 0
    current = None
    left_in_user = 0
    rows = []
    for size in sizes:
        big_target = min(args.big_user, size // 2)
        rss0, disk0, start_count, t_fill = _rss_mb(), _disk_mb(store_dir), filled, time.perf_counter()
        batch = []
        while filled < size:
            if big_filled < big_target:
                tenant, user = big
                big_filled += 1
            else:
                if left_in_user <= 0:
                    current = next_user()
                    ordinary.append(current)
                    left_in_user = current[2]
                tenant, user = current[0], current[1]
                left_in_user -= 1
            k = filled % len(pool)
            vec = pool[k] + nrng.normal(0, 0.02, pool.shape[1]).astype(np.float32)
            vec /= np.linalg.norm(vec)
            text = pool_text[k]
            batch.append(MemoryPoint(str(uuid.uuid4()), vec.tolist(), text, {
                "tenant_id": tenant, "user_id": user, "kind": "event", "status": "active", "text": text,
                "confidence": 0.7, "importance": 0.4, "created_at": time.time(), "source_type": "user_stated"}))
            filled += 1
            if len(batch) == 500:
                store.upsert(batch)
                batch = []
        if batch:
            store.upsert(batch)
        fill_s = time.perf_counter() - t_fill
        added = filled - start_count
        per_point_rss = (_rss_mb() - rss0) * 1024 / max(1, added)
        per_point_disk = (_disk_mb(store_dir) - disk0) * 1024 / max(1, added)
        measured = {}
        users = [("big user", Scope(tenant_id=big[0], user_id=big[1]), big_filled)]
        sample = [u for u in ordinary if u[2] >= 20][-5:] or ordinary[-5:]
        users += [(f"ordinary user ({statistics.median([u[2] for u in sample]):.0f} memories)", None, 0)]
        for label, scope, n in users:
            times: dict[str, list[float]] = {key: [] for key in TIMED}
            for i, (text, dense) in enumerate(queries):
                s = scope or Scope(tenant_id=sample[i % len(sample)][0], user_id=sample[i % len(sample)][1])
                store.search(s, dense=dense, text=text, limit=10)  # warm
                tag = f"{size}-{label}-{i}"
                for key, run in _timed_searches(store, s, text, dense, candidates=candidates, tag=tag):
                    times[key].append(run)
            measured[label] = times
        print(f"\n{size:,} points ({len(tenants)} tenants, {len(ordinary) + 1} users; big user {big_filled:,}); "
              f"filled {added:,} in {fill_s:.1f} s; memory per point: +{per_point_rss:.2f} KiB resident, "
              f"+{per_point_disk:.2f} KiB on disk", flush=True)
        for label, times in measured.items():
            p50 = {key: _pct(v, 50) * 1000 for key, v in times.items()}
            p95 = {key: _pct(v, 95) * 1000 for key, v in times.items()}
            print(f"  {label}", flush=True)
            for key, floor_key in (("hybrid", "floor"), ("searches", "floor"), ("retrieval", "embedded floor")):
                print(f"    {TIMED[key]:<58} p50/p95 {p50[key]:6.2f} / {p95[key]:6.2f} ms   "
                      f"{TIMED[floor_key]} {p50[floor_key]:6.2f} / {p95[floor_key]:6.2f} ms   "
                      f"p95 ratio {p95[key] / p95[floor_key]:.2f}x", flush=True)
            print(f"    {TIMED['keywords']:<58} p50/p95 {p50['keywords']:6.2f} / {p95['keywords']:6.2f} ms",
                  flush=True)
            rows.append({"size": size, "user": label, **{f"{key}_p95_ms": v for key, v in p95.items()}})
    store.close()
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
