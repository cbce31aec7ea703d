"""Every benchmark runs: each bench/*.py in its --quick mode (tiny data shipped in the repository), as its own process
the way a developer starts it, must exit 0 and print its figures. Nothing else imports the benches, so without this
one could stop importing or running unnoticed while docs/benchmarks.md quotes it.

Each run gets a Redis server of its own on a spare port (bulk_import purges its broker) and a scratch PostgreSQL
database (bulk_import and load need one; conftest's `bench_env`); the benches that default to SQLite keep it. The
embedder's ONNX export is made once for all of them.
"""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# A bench is a module one runs (bench/scoring.py only holds what the benches share).
BENCHES = sorted(p.name for p in (REPO / "bench").glob("*.py") if 'if __name__ == "__main__":' in p.read_text())
# What each quick run must print: its figures, as numbers.
FIGURES = {
    "answers.py": [r"answers, locomo set .*: 4 questions", r"answers, product set .*: 4 questions",
                   r"\ncontinuum\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+(?:[\d.]+|n/a)\s+[\d.]+\s+[\d.]+\n",
                   r"\noracle \(evidence turns\)\s+[\d.]+\s+[\d.]+\s+[\d.]+",
                   r"F1 continuum/oracle (?:[\d.]+|n/a), F1 continuum/dense (?:[\d.]+|n/a)",
                   r"F1 continuum vs dense, question by question: \d+ wins, \d+ losses, \d+ ties; mean difference "
                   r"[+-][\d.]+ \(95% bootstrap interval [+-][\d.]+ to [+-][\d.]+\)",
                   r"\ncontinuum\[no-neighbours\]\s+[\d.]+\s+[\d.]+",
                   r"continuum\[no-neighbours\] \(MEMORY_NEIGHBOUR_EXPANSION_HITS=0\): F1 / continuum (?:[\d.]+|n/a)",
                   # 4 questions, 2 sets, 4 contexts; a variant whose context is continuum's own is read once.
                   r"reader answers, all sets: 32, of them \d+ from the cache"],
    "buffer.py": [r"\n\s+10\s+[\d.]+ms\s+[\d.]+ms", r"at \d+ turns: composed \d+ tokens vs transcript \d+"],
    "bulk_import.py": [r"bulk import figure: 48 messages in [\d.]+ s \([\d.]+ messages/s"],
    "extraction.py": [r'"rules": \{[^}]*"gold_recall": [\d.]+'],
    "fragments.py": [r"fragments, product set \(1 conversations, \d+ user messages", r"rows per user message: [\d.]+",
                     r"mid-token starts\s+\d+\s+\d+", r"heading only\s+\d+\s+\d+", r"exact duplicates\s+\d+\s+\d+"],
    "load.py": [r"errors\s+0 \(", r"throughput\s+[\d.]+ turns/s", r"non-LLM overhead\s+p50 \d+ ms"],
    "locomo.py": [r"\d+ questions", r"recall@10\s+[\d.]+\s+[\d.]+", r"retrieval p50 / p95 \(ms\)\s+[\d.]+ /",
                  r"gold answer's content words held within 1,000 tokens, service / dense baseline: [\d.]+ / [\d.]+"],
    "receipts.py": [r'"receipts_on": \{\s*"p50_ms": [\d.]+', r'"p50_delta_ms": -?[\d.]+'],
    # Not secrets.py: a script's folder comes first on its path, and numpy imports the standard library's secrets.
    "secrets_filter.py": [r"corpus, texts to keep: \d+/\d+ changed",
                          r"corpus, secrets: \d+/\d+ missed .*; \d+ ms per 1,000"],
    "scale.py": [r"big user\n\s+hybrid \(the store's own fusion, k 10\)\s+p50/p95\s+[\d.]+ /\s+[\d.]+ ms",
                 r"with the query's embedding, as retrieval runs them\s+p50/p95\s+[\d.]+ /\s+[\d.]+ ms.*"
                 r"p95 ratio [\d.]+x"],
    "project_facts_count.py": [r"product\s+1 conversations, \d+ user turns: \d+ facts, \d+ distinct"],
    "turn_profile.py": [r"SQL statements per turn [\d.]+", r"LLM calls per turn [\d.]+"],
    "product_set.py": [r'"conversations": \d+, "sessions_min": \d+, "messages": \d+', r'"questions": \d+'],
    "vector_store.py": [r"qdrant-edge\s+dense\s+20\s+[\d.]+", r"p50 ratio local/edge: dense [\d.]+x"],
}
SCRATCH_DATABASE = ("bulk_import.py", "load.py", "turn_profile.py")
# A quick run also shows a part switched off, where the bench takes such variants.
QUICK_ARGS = {"answers.py": ["--variant", "no-neighbours:MEMORY_NEIGHBOUR_EXPANSION_HITS=0"]}


def test_every_bench_has_its_figures_checked():
    assert BENCHES and set(BENCHES) == set(FIGURES), "a new bench needs a --quick mode and its figures named here"


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("bench", BENCHES)
def test_quick_mode_runs_and_prints_its_figures(bench, bench_env):
    env, database_url = bench_env
    argv = [sys.executable, str(REPO / "bench" / bench), "--quick", *QUICK_ARGS.get(bench, [])]
    if bench in SCRATCH_DATABASE:
        argv += ["--database-url", database_url]
    started = time.monotonic()
    run = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=540)
    output = run.stdout + run.stderr
    print(f"\n{bench} --quick: exit {run.returncode} in {time.monotonic() - started:.0f} s\n{run.stdout[-1500:]}")
    assert run.returncode == 0, output[-4000:]
    for figure in FIGURES[bench]:
        assert re.search(figure, run.stdout), f"{bench} --quick did not print {figure!r}:\n{run.stdout[-3000:]}"
