"""Project facts: how many the rules read off each set's user turns, by slot kind, without importing anything.

Every user turn (speaker_a in the product's shape; both speakers in LoCoMo, where each is an end user) goes through
`rules_extract` as a pure call, and the facts of the project slots (version, deadline, port, uses) are counted:
- facts: every such candidate, one per turn that states it;
- distinct: one per conversation, slot and value (what the memory keeps: a restatement reinforces the first);
- per slot kind, and for the conversations named by --list, every distinct fact with the turn that first states it.
No service, database or embedder: the figures describe what the rules write, not what retrieval does with it.

    .venv/bin/python bench/project_facts_count.py [--beam-conversations 2] [--list beam] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memory.extraction.rules import rules_extract  # noqa: E402

SHARED = REPO.parent / "shared" / "bench"
SLOT_KINDS = ("version", "deadline", "port", "uses")


def _sessions(conversation: dict) -> list[str]:
    keys = [k for k in conversation if k.startswith("session_") and not k.endswith("date_time")]
    return sorted(keys, key=lambda k: int(k.split("_")[1]))


def user_turns(samples: list[dict], *, both_speakers: bool):
    """(conversation id, dia_id, speaker, text) of every turn an end user says."""
    for sample in samples:
        conv = sample["conversation"]
        speakers = {conv["speaker_a"], conv["speaker_b"]} if both_speakers else {conv["speaker_a"]}
        for key in _sessions(conv):
            for turn in conv[key]:
                if turn["speaker"] in speakers:
                    yield sample["sample_id"], turn["dia_id"], turn["speaker"], turn["text"]


def count(samples: list[dict], *, both_speakers: bool) -> dict:
    facts, distinct, turns = [], {}, 0
    for conv, dia, who, text in user_turns(samples, both_speakers=both_speakers):
        turns += 1
        for c in rules_extract(text, who=who, with_project_facts=True):
            kind = c.subject.partition(":")[0]
            if c.kind == "fact" and kind in SLOT_KINDS and c.subject.startswith(f"{kind}: "):
                row = {"conversation": conv, "dia_id": dia, "subject": c.subject, "value": c.value, "text": c.text}
                facts.append(row)
                distinct.setdefault((conv, c.subject, c.value.lower()), row)
    return {"turns": turns, "facts": len(facts), "distinct": len(distinct),
            "by_kind": dict(Counter(r["subject"].partition(":")[0] for r in facts)),
            "distinct_by_kind": dict(Counter(r["subject"].partition(":")[0] for r in distinct.values())),
            "listed": list(distinct.values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beam", default=str(SHARED / "beam-dev.json"))
    parser.add_argument("--locomo", default=str(SHARED / "locomo-dev.json"))
    parser.add_argument("--product", default=str(REPO / "bench" / "data" / "product-dev.json"))
    parser.add_argument("--beam-conversations", type=int, default=2)
    parser.add_argument("--list", default="beam,locomo", help="sets whose distinct facts are listed")
    parser.add_argument("--json", help="write the figures and the facts here")
    parser.add_argument("--quick", action="store_true",
                        help="the product set's first conversation only (shipped in the repository), nothing listed")
    args = parser.parse_args()

    if args.quick:
        sets, args.list = {"product": (json.loads(Path(args.product).read_text())[:1], False)}, ""
    else:
        sets = {
            "beam": (json.loads(Path(args.beam).read_text())[:args.beam_conversations], False),
            "locomo": (json.loads(Path(args.locomo).read_text()), True),
            "product": (json.loads(Path(args.product).read_text()), False),
        }
    report = {}
    for name, (samples, both) in sets.items():
        r = report[name] = count(samples, both_speakers=both)
        kinds = ", ".join(f"{k} {r['by_kind'].get(k, 0)}/{r['distinct_by_kind'].get(k, 0)}" for k in SLOT_KINDS)
        print(f"{name:8} {len(samples)} conversations, {r['turns']} user turns: {r['facts']} facts, "
              f"{r['distinct']} distinct (by kind, facts/distinct: {kinds})")
    for name in filter(None, args.list.split(",")):
        print(f"\n{name}: distinct facts")
        for row in report[name]["listed"]:
            print(f"  {row['conversation']} {row['dia_id']:>7}  {row['subject']:<40} {row['value']:<20} {row['text']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
