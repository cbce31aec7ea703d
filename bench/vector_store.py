"""Filtered query latency of the two vector-store backends, side by side, on the same random data.

Usage: .venv/bin/python bench/vector_store.py [--points 20000] [--queries 300] [--local-queries 30] [--json out.json]
       .venv/bin/python bench/vector_store.py --quick   (1,000 points, 20 queries: seconds, shows the bench runs)

Both backends hold the same points (random unit vectors, short texts over a Zipf vocabulary) spread over
tenants x users, and answer the same tenant + user filtered queries through the project's own store classes
(so the figures include the filter builder and the post-filter guard): dense-only and hybrid (dense + BM25,
RRF). Qdrant Edge is measured as written (no optimize) and after optimize(); qdrant-client's local mode
on fewer queries, since each of its filtered queries scans every point in Python.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from qdrant_client import QdrantClient  # noqa: E402

from infra.vector_store import MemoryPoint, Scope  # noqa: E402
from infra.vector_store.edge import EdgeVectorStore  # noqa: E402
from infra.vector_store.server import ServerVectorStore  # noqa: E402


def make_points(n: int, dim: int, tenants: int, users: int, rng: random.Random, nrng) -> list[MemoryPoint]:
    vocab = [f"term{i}" for i in range(3000)]
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    vectors = nrng.standard_normal((n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    now = time.time()
    points = []
    for i in range(n):
        tenant, user = i % tenants, (i // tenants) % users
        text = " ".join(rng.choices(vocab, weights=weights, k=12))
        payload = {"tenant_id": f"tenant-{tenant}", "user_id": f"user-{user}", "kind": "fact",
                   "status": "active" if i % 10 else "superseded", "text": text, "created_at": now - i}
        if i % 7 == 0:
            payload["expires_at"] = now + (3600 if i % 2 else -3600)
        points.append(MemoryPoint(memory_id=str(uuid.UUID(int=i + 1)), dense=vectors[i].tolist(), text=text,
                                  payload=payload))
    return points


def make_queries(count: int, dim: int, tenants: int, users: int, rng: random.Random, nrng) -> list[dict]:
    vocab = [f"term{i}" for i in range(3000)]
    out = []
    for _ in range(count):
        q = nrng.standard_normal(dim).astype(np.float32)
        out.append({"scope": Scope(f"tenant-{rng.randrange(tenants)}", f"user-{rng.randrange(users)}"),
                    "dense": (q / np.linalg.norm(q)).tolist(),
                    "text": " ".join(rng.choice(vocab[:600]) for _ in range(3))})
    return out


def load(store, points: list[MemoryPoint], batch: int = 500) -> float:
    started = time.perf_counter()
    for i in range(0, len(points), batch):
        store.upsert(points[i:i + batch])
    return time.perf_counter() - started


def measure(store, queries: list[dict], *, hybrid: bool, now: float) -> tuple[dict, list[list[str]]]:
    for q in queries[:5]:  # warm caches and lazy imports
        store.search(q["scope"], dense=q["dense"], text=q["text"] if hybrid else None, limit=10, not_expired_at=now)
    latencies, results = [], []
    for q in queries:
        started = time.perf_counter()
        hits = store.search(q["scope"], dense=q["dense"], text=q["text"] if hybrid else None, limit=10,
                            not_expired_at=now)
        latencies.append((time.perf_counter() - started) * 1000)
        assert all(h.payload["tenant_id"] == q["scope"].tenant_id and h.payload["user_id"] == q["scope"].user_id
                   for h in hits)
        results.append([h.memory_id for h in hits])
    latencies.sort()
    pct = lambda p: latencies[min(len(latencies) - 1, int(round(p / 100 * (len(latencies) - 1))))]  # noqa: E731
    return {"queries": len(queries), "p50_ms": round(pct(50), 3), "p95_ms": round(pct(95), 3),
            "mean_ms": round(statistics.fmean(latencies), 3)}, results


def both_modes(store, queries: list[dict], label: str, rows: list, *, now: float) -> tuple[dict, dict, list[list[str]]]:
    """Dense and hybrid figures of one store (added to rows under label), and the dense search's ids."""
    dense, dense_ids = measure(store, queries, hybrid=False, now=now)
    hybrid, _ = measure(store, queries, hybrid=True, now=now)
    rows += [(label, "dense", dense), (label, "hybrid", hybrid)]
    return dense, hybrid, dense_ids


def overlap(a: list[list[str]], b: list[list[str]]) -> float:
    """Mean top-10 set agreement between two backends on the same queries (dense search is exact on both)."""
    pairs = [(set(x), set(y)) for x, y in zip(a, b) if x or y]
    return round(statistics.fmean(len(x & y) / max(len(x | y), 1) for x, y in pairs), 3) if pairs else 1.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--tenants", type=int, default=10)
    ap.add_argument("--users", type=int, default=20, help="users per tenant")
    ap.add_argument("--queries", type=int, default=300, help="queries per mode for Qdrant Edge")
    ap.add_argument("--local-queries", type=int, default=30, help="queries per mode for qdrant-client local mode")
    ap.add_argument("--no-optimize", action="store_true", help="skip the Edge-after-optimize() rows")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: seconds, to show the bench still runs")
    args = ap.parse_args()
    if args.quick:
        ap.set_defaults(points=1000, tenants=2, users=5, queries=20, local_queries=5)
        args = ap.parse_args()

    rng, nrng = random.Random(args.seed), np.random.default_rng(args.seed)
    points = make_points(args.points, args.dim, args.tenants, args.users, rng, nrng)
    queries = make_queries(args.queries, args.dim, args.tenants, args.users, rng, nrng)
    local_queries = queries[: args.local_queries]
    now = time.time()
    per_user = args.points / (args.tenants * args.users)
    print(f"{args.points} points, {args.dim}-d, {args.tenants} tenants x {args.users} users "
          f"(~{per_user:.0f} points per user); filter: tenant + user + status + not expired; limit 10")

    rows, report = [], {"points": args.points, "dim": args.dim, "tenants": args.tenants,
                        "users_per_tenant": args.users, "backends": {}}
    with tempfile.TemporaryDirectory(prefix="bench-vs-") as tmp:
        edge = EdgeVectorStore(Path(tmp) / "edge", dim=args.dim)
        edge.ensure_collection()
        edge_load = load(edge, points)
        edge_dense, edge_hybrid, edge_dense_ids = both_modes(edge, queries, "qdrant-edge", rows, now=now)
        report["backends"]["edge"] = {"load_s": round(edge_load, 2), "dense": edge_dense, "hybrid": edge_hybrid}
        if not args.no_optimize:
            started = time.perf_counter()
            edge.vacuum()  # Edge's optimizer run: vacuum, merge segments (no HNSW graph: see EdgeVectorStore)
            opt_s = time.perf_counter() - started
            opt_dense, opt_hybrid, _ = both_modes(edge, queries, "qdrant-edge optimized", rows, now=now)
            report["backends"]["edge_optimized"] = {"optimize_s": round(opt_s, 2), "dense": opt_dense,
                                                    "hybrid": opt_hybrid}
        edge.close()

        local = ServerVectorStore(QdrantClient(location=":memory:"), collection="bench", dim=args.dim)
        local.ensure_collection()
        local_load = load(local, points)
        local_dense, local_hybrid, local_dense_ids = both_modes(local, local_queries, "qdrant-client local", rows,
                                                               now=now)
        report["backends"]["client_local"] = {"load_s": round(local_load, 2), "dense": local_dense,
                                              "hybrid": local_hybrid}
        local.close()

    report["dense_top10_agreement"] = overlap(edge_dense_ids[: len(local_dense_ids)], local_dense_ids)
    report["ratio_local_over_edge_p50"] = {
        "dense": round(local_dense["p50_ms"] / edge_dense["p50_ms"], 1),
        "hybrid": round(local_hybrid["p50_ms"] / edge_hybrid["p50_ms"], 1),
    }
    print(f"\n{'backend':<24}{'mode':<8}{'queries':>8}{'p50 ms':>10}{'p95 ms':>10}{'mean ms':>10}")
    for backend, mode, r in rows:
        print(f"{backend:<24}{mode:<8}{r['queries']:>8}{r['p50_ms']:>10.3f}{r['p95_ms']:>10.3f}{r['mean_ms']:>10.3f}")
    print(f"\nload: edge {edge_load:.1f} s, client local {local_load:.1f} s")
    print(f"p50 ratio local/edge: dense {report['ratio_local_over_edge_p50']['dense']}x, "
          f"hybrid {report['ratio_local_over_edge_p50']['hybrid']}x")
    print(f"dense top-10 agreement edge vs local (same queries): {report['dense_top10_agreement']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
