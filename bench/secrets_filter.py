"""Secrets filter benchmark: false positives on real project chats and on the repository's corpus of texts to keep,
misses on its corpus of secrets, and the time per 1,000 messages, for each candidate filter in one run.

Candidates:
- current: `infra.secrets.secrets_redact` as the working tree has it.
- before: `infra/secrets.py` at a git revision (--before, default the hand-grown filter this one replaced), loaded from
  git without touching the working tree.
- detect-secrets: Yelp's detect-secrets as a library (every default plugin and heuristic filter, line by line as it
  scans a file; each secret it reports is replaced). Measured only if installed (`pip install detect-secrets==1.5.0`);
  the service does not depend on it.

A false positive is a message the filter changed: the chats (beam-dev: every user and assistant message of BEAM's
eight project conversations, see shared/bench/README.md) and the corpus's texts to keep hold no secret. A miss is a
corpus secret still in the text after redaction.

    .venv/bin/python bench/secrets_filter.py [--beam ../shared/bench/beam-dev.json] [--before REV] [--limit N]
                                      [--ds-limit N] [--examples 3] [--no-detect-secrets] [--json out.json]

`--quick` measures the corpus alone (the repository's data), current filter only, in seconds.
"""
from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.infra.secrets_corpus import KEEP, secrets  # noqa: E402

REDACTED = "[redacted]"
# The hand-grown filter (regular expressions and a label list) that the precise one replaced.
BEFORE_REV = "18b53d0"


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--beam", default=str(REPO.parent / "shared" / "bench" / "beam-dev.json"))
    p.add_argument("--before", default=BEFORE_REV, help="git revision of the filter to compare with ('' to skip)")
    p.add_argument("--limit", type=int, default=0, help="first N beam-dev messages only (0: all)")
    p.add_argument("--ds-limit", type=int, default=0,
                   help="first N beam-dev messages for detect-secrets, which is slow (0: as --limit)")
    p.add_argument("--examples", type=int, default=3, help="false positives shown per candidate")
    p.add_argument("--no-detect-secrets", action="store_true")
    p.add_argument("--json", dest="json_path")
    p.add_argument("--quick", action="store_true", help="the corpus only, current filter: checks the bench still runs")
    args = p.parse_args(argv)
    if args.quick:
        args.beam, args.before, args.no_detect_secrets = "", "", True
    return args


def beam_messages(path: str) -> list[tuple[str, str, str]]:
    """(where, speaker, text) for every turn of every session."""
    data = json.loads(Path(path).read_text())
    out = []
    for sample in data:
        conv = sample["conversation"]
        for key, turns in conv.items():
            if key.startswith("session_") and isinstance(turns, list):
                out += [(f"{sample['sample_id']} {t['dia_id']}", t["speaker"], t["text"]) for t in turns]
    return out


def _load_rev(rev: str):
    source = subprocess.run(["git", "show", f"{rev}:infra/secrets.py"], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout
    folder = Path(tempfile.mkdtemp(prefix="secrets-before-"))
    (folder / "secrets_before.py").write_text(source)
    spec = importlib.util.spec_from_file_location("secrets_before", folder / "secrets_before.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["secrets_before"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return lambda text: module.secrets_redact(text).text


def _detect_secrets_redactor():
    from detect_secrets.core import scan
    from detect_secrets.settings import default_settings

    context = default_settings()
    context.__enter__()  # every default plugin and filter, for the rest of the run (kept referenced below: a
    # collected context manager would restore the empty settings)
    scan.get_settings().disable_filters("detect_secrets.filters.common.is_invalid_file")
    scan.get_filters.cache_clear()

    def redact(text: str) -> str:
        lines = list(enumerate(text.splitlines(), 1))
        # The function scan_file runs on each file's lines (scan_line would run its plugins in eager mode, which
        # flags nearly every word).
        found = {s.secret_value for s in scan._process_line_based_plugins(lines, filename="message.txt")}
        for value in sorted(filter(None, found), key=len, reverse=True):
            text = text.replace(value, REDACTED)
        return text

    redact.settings = context
    return redact


def _first_change(before: str, after: str, width: int = 70) -> str:
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op != "equal":
            lo, hi = max(0, i1 - width), min(len(before), i2 + 20)
            return f"...{before[lo:hi]!r}... -> {after[max(0, j1 - 10):j2 + 10]!r}"
    return ""


def measure(name: str, redact, beam: list, examples: int) -> dict:
    result: dict = {"candidate": name}
    if beam:
        start = time.perf_counter()
        changed = [(where, speaker, text, out) for where, speaker, text in beam if (out := redact(text)) != text]
        elapsed = time.perf_counter() - start
        by_speaker = Counter(speaker for _, speaker, _, _ in changed)
        result.update(beam_messages=len(beam), beam_false_positives=len(changed),
                      beam_by_speaker=dict(by_speaker), ms_per_1000_messages=round(elapsed / len(beam) * 1e6),
                      beam_examples=[f"{w} {s}: {_first_change(t, o)}" for w, s, t, o in changed[:examples]])
    corpus = secrets()
    start = time.perf_counter()
    keep_out = [redact(k.text) for k in KEEP]
    secret_out = [redact(s.text) for s in corpus]
    result["ms_per_1000_corpus_texts"] = round((time.perf_counter() - start) / (len(KEEP) + len(corpus)) * 1e6)
    keep_changed = [k for k, out in zip(KEEP, keep_out) if out != k.text]
    missed = [s for s, out in zip(corpus, secret_out) if s.secret in out]
    result.update(keep_texts=len(KEEP), keep_false_positives=len(keep_changed),
                  keep_by_family=dict(Counter(k.family for k in keep_changed)),
                  keep_examples=[f"{k.family}: {_first_change(k.text, redact(k.text))}"
                                 for k in keep_changed[:examples]],
                  secrets=len(corpus), secrets_missed=len(missed), missed_by_kind=dict(Counter(s.kind for s in missed)),
                  missed_examples=[f"{s.kind}: {s.text[:90]!r}" for s in missed[:examples]])
    return result


def report(r: dict) -> None:
    print(f"\n== {r['candidate']}")
    if "beam_messages" in r:
        print(f"  beam-dev: {r['beam_false_positives']}/{r['beam_messages']} messages changed "
              f"(by speaker: {r['beam_by_speaker']}); {r['ms_per_1000_messages']} ms per 1,000 messages")
        for line in r["beam_examples"]:
            print("     ", line[:300])
    print(f"  corpus, texts to keep: {r['keep_false_positives']}/{r['keep_texts']} changed "
          f"(by family: {r['keep_by_family']})")
    for line in r["keep_examples"]:
        print("     ", line[:300])
    print(f"  corpus, secrets: {r['secrets_missed']}/{r['secrets']} missed (by kind: {r['missed_by_kind']}); "
          f"{r['ms_per_1000_corpus_texts']} ms per 1,000 corpus texts")
    for line in r["missed_examples"]:
        print("     ", line[:300])


def main(argv=None) -> None:
    args = _args(argv)
    beam = []
    if args.beam and Path(args.beam).exists():
        beam = beam_messages(args.beam)
        beam = beam[:args.limit] if args.limit else beam
    else:
        print(f"no beam-dev at {args.beam or '(not asked)'}: corpus only")

    from infra.secrets import secrets_redact

    candidates = [("current (infra/secrets.py)", lambda text: secrets_redact(text).text, beam)]
    if args.before:
        try:
            candidates.insert(0, (f"before ({args.before}:infra/secrets.py)", _load_rev(args.before), beam))
        except (subprocess.CalledProcessError, FileNotFoundError):  # a copy of the tree without git history
            print(f"git revision {args.before} is not available here: no 'before' figures")
    if not args.no_detect_secrets:
        try:
            ds_beam = beam[:args.ds_limit] if args.ds_limit else beam
            candidates.append(("detect-secrets (library, default plugins and filters)", _detect_secrets_redactor(),
                               ds_beam))
        except ImportError:
            print("detect-secrets is not installed: pip install detect-secrets==1.5.0 to measure it")
    results = []
    for name, redact, messages in candidates:
        results.append(measure(name, redact, messages, args.examples))
        report(results[-1])
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
