"""Structural check for heldout-pairs-b.json (standard library only).

Run: python3 bench/data/check_heldout_b.py [path]
"""
import collections
import datetime
import json
import os
import re
import sys

DATE_FORMAT = "%I:%M %p on %d %B, %Y"
DIA = re.compile(r"^D(\d+):(\d+)$")


def main(path):
    data = json.load(open(path, encoding="utf-8"))
    errors = []
    total = collections.Counter()
    assert isinstance(data, list), "top level must be a list"
    seen_ids = set()
    for sample in data:
        sid = sample.get("sample_id")
        if not sid or sid in seen_ids:
            errors.append(f"bad or duplicate sample_id {sid!r}")
        seen_ids.add(sid)
        conv = sample["conversation"]
        a, b = conv.get("speaker_a"), conv.get("speaker_b")
        if not a or not b or a == b:
            errors.append(f"{sid}: bad speakers {a!r} {b!r}")
        n_sessions = 0
        while f"session_{n_sessions + 1}" in conv:
            n_sessions += 1
        extra = [k for k in conv if re.match(r"session_\d+$", k) and int(k.split("_")[1]) > n_sessions]
        if extra:
            errors.append(f"{sid}: session numbering has gaps: {extra}")
        dia_ids = set()
        prev_date = None
        turn_counts = []
        for s in range(1, n_sessions + 1):
            raw = conv.get(f"session_{s}_date_time", "")
            try:
                date = datetime.datetime.strptime(raw.strip(), DATE_FORMAT)
            except ValueError:
                errors.append(f"{sid}: session {s} date {raw!r} does not parse")
                date = None
            if date and prev_date and date <= prev_date:
                errors.append(f"{sid}: session {s} date {raw!r} is not after the previous one")
            prev_date = date or prev_date
            turns = conv[f"session_{s}"]
            turn_counts.append(len(turns))
            for n, turn in enumerate(turns, 1):
                want = f"D{s}:{n}"
                if turn.get("dia_id") != want:
                    errors.append(f"{sid}: turn {want} has dia_id {turn.get('dia_id')!r}")
                if turn.get("speaker") not in (a, b):
                    errors.append(f"{sid}: {want} speaker {turn.get('speaker')!r}")
                if not str(turn.get("text", "")).strip():
                    errors.append(f"{sid}: {want} empty text")
                extra_keys = set(turn) - {"speaker", "dia_id", "text", "blip_caption"}
                if extra_keys:
                    errors.append(f"{sid}: {want} unexpected keys {sorted(extra_keys)}")
                dia_ids.add(turn.get("dia_id"))
        cats = collections.Counter()
        for i, qa in enumerate(sample["qa"], 1):
            if qa.get("category") not in (1, 2, 3, 4):
                errors.append(f"{sid}: question {i} category {qa.get('category')!r}")
            if not str(qa.get("question", "")).strip():
                errors.append(f"{sid}: question {i} empty")
            if not str(qa.get("answer", "")).strip():
                errors.append(f"{sid}: question {i} has an empty answer")
            ev = qa.get("evidence") or []
            if not ev:
                errors.append(f"{sid}: question {i} has no evidence")
            for d in ev:
                if not DIA.match(str(d)) or d not in dia_ids:
                    errors.append(f"{sid}: question {i} evidence {d!r} does not exist")
            if qa.get("category") == 1 and len(set(ev)) < 2:
                errors.append(f"{sid}: question {i} is multi-hop with fewer than 2 evidence turns")
            cats[qa.get("category")] += 1
        total.update(cats)
        total["questions"] += len(sample["qa"])
        total["turns"] += sum(turn_counts)
        total["sessions"] += n_sessions
        first = conv.get("session_1_date_time")
        last = conv.get(f"session_{n_sessions}_date_time")
        print(f"{sid}: {a} & {b}, {n_sessions} sessions ({first} .. {last}), "
              f"{sum(turn_counts)} turns (per session {min(turn_counts)}-{max(turn_counts)}), "
              f"{len(sample['qa'])} questions: " +
              ", ".join(f"cat{c} {cats[c]}" for c in (1, 2, 3, 4)))
    print(f"total: {total['sessions']} sessions, {total['turns']} turns, {total['questions']} questions: " +
          ", ".join(f"cat{c} {total[c]}" for c in (1, 2, 3, 4)))
    if errors:
        print(f"{len(errors)} problem(s):")
        for e in errors:
            print("  " + e)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    default = os.path.join(os.path.dirname(os.path.abspath(__file__)), "heldout-pairs-b.json")
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else default))
