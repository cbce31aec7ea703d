"""Fragments: how many rows a conversation leaves per user message, and how many of its passages are fragments.

Each set is imported through the service as bench/locomo.py does (`--shape assistant`: the first speaker is the end
user, the other the assistant; rules only, no model), then the stored memories are read back and counted:
- rows per user message, by kind (and the events split by whose words they are), and passages per message of each
  role (an event memory of a message is one of its passages);
- fragments among the passages of each role:
  - mid-token starts: the passage's first character continues the run of non-blank characters (a word, an
    identifier, a number, an expression such as `default=False)`) of the message it was cut from. Decided from the
    source message: each passage is located in the message's text (in order, after the previous one), and the cut
    is mid-token when the character before it in the message is not blank;
  - heading only: every line is a heading (`## Setup`, or a line that is all bold, `**Step 1:**`);
  - fence only: a code fence with nothing readable in it (no word of two letters or digits besides the fence's
    language and any heading), such as "```html <!";
  - duplicates: a passage whose text (the speaker's name left out) is exactly the text of an earlier passage of the
    same user, counted by where the first one is (the same message, another message of the session, another
    session); near-duplicates: the same text once runs of whitespace are collapsed, not counted as exact;
  - passages over the bound (MEMORY_PASSAGE_MAX_TOKENS, the reason for cutting: the embedder's window), and
    passages that could not be located in their message (the text was changed on the way: a secret redacted,
    filler dropped), which are not judged mid-token.
No figure depends on a question: the counts describe what is stored.

    .venv/bin/python bench/fragments.py [--sets product,project,beam] [--conversations N]
        [--beam-conversations 2] [--reuse-dir DIR] [--database-url URL] [--json out.json] [--examples N]

--reuse-dir keeps each set's import (DIR/imported-<set>.json, the SQLite file and the Edge folder) for the next run,
with the same --database-url; a changed splitter needs a new folder. --quick: the product set's first conversation,
in a temporary folder.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import locomo  # noqa: E402
from bench.django_env import report_write  # noqa: E402

DATASETS = {"product": REPO / "bench" / "data" / "product-dev.json",
            "project": REPO / "bench" / "data" / "heldout-project.json",
            "beam": REPO.parent / "shared" / "bench" / "beam-dev.json"}
ROLES = ("assistant", "user")

_HEADING = re.compile(r"^\s{0,3}(?:#{1,6}(?:\s.*)?|\*\*[^*\n]+\*\*:?|__[^_\n]+__:?)\s*$")
_FENCE = re.compile(r"^\s*(?:`{3,}|~{3,})")
_READABLE = re.compile(r"[^\W_]{2,}")


def _lines(text: str) -> list[tuple[str, str]]:
    """The non-blank lines, each as ("fence" | "code" | "heading" | "text", line): inside a fenced block a line is
    code whatever it looks like (a "# comment" is no heading)."""
    out, fence = [], None
    for line in text.splitlines():
        if not line.strip():
            continue
        opening = _FENCE.match(line)
        if opening and fence is None:
            fence = opening.group(0).strip()[0]
            out.append(("fence", line))
        elif fence is not None and len(line.strip()) >= 3 and set(line.strip()) == {fence}:
            fence = None
            out.append(("fence", line))
        elif fence is not None:
            out.append(("code", line))
        else:
            out.append(("heading" if _HEADING.match(line) else "text", line))
    return out


def is_heading_only(text: str) -> bool:
    """Every line is a heading: an ATX heading (`## Setup`) or a line that is all bold (`**Step 1:**`)."""
    lines = _lines(text)
    return bool(lines) and all(kind == "heading" for kind, _ in lines)


def is_fence_only(text: str) -> bool:
    """A code fence with nothing readable inside or after it ("```html\\n<!", "```html <!", "```"): besides the
    fence's language and any heading, no word of two letters or digits."""
    lines = _lines(text)
    if not any(kind == "fence" for kind, _ in lines):
        return False
    rest = []
    for kind, line in lines:
        if kind == "fence":
            rest += line[_FENCE.match(line).end():].split()[1:]  # the language named after the fence is no content
        elif kind != "heading":
            rest.append(line)
    return not any(_READABLE.search(part) for part in rest)


def _find(source: str, passage: str, cursor: int) -> int | None:
    """Where the passage starts in its message, at or after `cursor`: the whole passage, else its opening words with
    any whitespace between them (on the way the text may have changed: blank lines collapsed, filler dropped, a
    secret redacted). A passage that opens with a fence line the splitter wrote (a long code block cut into fenced
    parts) starts where its first line of code does."""
    at = source.find(passage, cursor)
    if at >= 0:
        return at
    candidates = [passage]
    first, _, after = passage.partition("\n")
    if _FENCE.match(first) and after.strip():
        candidates.append(after)
    for n in (8, 4, 2, 1):
        for text in candidates:
            words = text.split()[:n]
            if not words or (len(words) == 1 and len(words[0]) < 8):
                continue  # one short word found elsewhere in the message is no evidence
            found = re.compile(r"\s+".join(map(re.escape, words))).search(source, cursor)
            if found:
                return found.start()
    return None


def passage_offsets(source: str, passages: list[str]) -> list[int | None]:
    """Each passage's offset in its message's text (None where it cannot be found), located in order: each after
    the middle of the one before it, so a repeated opening finds its own place."""
    out, cursor = [], 0
    for passage in passages:
        at = _find(source, passage, cursor)
        out.append(at)
        if at is not None:
            cursor = at + max(1, len(passage) // 2)
    return out


def starts_mid_token(source: str, offset: int) -> bool:
    """The cut at `offset` falls inside a run of non-blank characters of the message."""
    return 0 < offset < len(source) and not source[offset - 1].isspace() and not source[offset].isspace()


@dataclass
class Passage:
    role: str
    session: str
    message: str
    text: str  # without the speaker's name


@dataclass
class RoleFigures:
    messages: int = 0
    passages: int = 0
    split_messages: int = 0  # messages stored as more than one passage
    mid_token: int = 0
    heading_only: int = 0
    fence_only: int = 0
    over_bound: int = 0
    unlocated: int = 0
    duplicates: Counter = field(default_factory=Counter)  # by where the first telling is
    near_duplicates: int = 0
    tokens: list[int] = field(default_factory=list)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def example(self, label: str, text: str, limit: int) -> None:
        kept = self.examples.setdefault(label, [])
        if len(kept) < limit:
            kept.append(text[:120].replace("\n", "⏎"))

    def as_dict(self) -> dict:
        per = self.passages / self.messages if self.messages else 0.0
        return {"messages": self.messages, "passages": self.passages, "passages_per_message": round(per, 2),
                "messages_split": self.split_messages, "mid_token": self.mid_token,
                "heading_only": self.heading_only, "fence_only": self.fence_only,
                "duplicates": sum(self.duplicates.values()), "duplicates_by_first_telling": dict(self.duplicates),
                "near_duplicates": self.near_duplicates, "over_bound": self.over_bound, "unlocated": self.unlocated,
                "tokens_median": statistics.median(self.tokens) if self.tokens else 0,
                "tokens_max": max(self.tokens, default=0), "examples": self.examples}


def passages_judge(*, sources: dict[str, str], passages: list[Passage], bound: int, count_tokens,
                   examples: int = 3) -> dict[str, RoleFigures]:
    """The fragment figures of one user's passages, by role. `sources`: each message's text by id (every message of
    the role, passages or not); `passages`: in the order they were stored (by message, then position)."""
    figures = {role: RoleFigures() for role in ROLES}
    by_message: dict[str, list[Passage]] = {}
    for p in passages:
        by_message.setdefault(p.message, []).append(p)
    first_exact: dict[str, Passage] = {}
    first_near: dict[str, Passage] = {}
    for mid, own in by_message.items():
        f = figures[own[0].role]
        f.passages += len(own)
        f.split_messages += len(own) > 1
        source = sources.get(mid, "")
        for p, at in zip(own, passage_offsets(source, [p.text for p in own])):
            tokens = count_tokens(p.text)
            f.tokens.append(tokens)
            if tokens > bound:
                f.over_bound += 1
            if at is None:
                f.unlocated += 1
                f.example("unlocated", p.text, examples)
            elif starts_mid_token(source, at):
                f.mid_token += 1
                f.example("mid_token", source[max(0, at - 20):at] + "|" + p.text, examples)
            if is_heading_only(p.text):
                f.heading_only += 1
                f.example("heading_only", p.text, examples)
            elif is_fence_only(p.text):
                f.fence_only += 1
                f.example("fence_only", p.text, examples)
            near = " ".join(p.text.split())
            if p.text in first_exact:
                first = first_exact[p.text]
                where = ("same message" if first.message == p.message else
                         "same session" if first.session == p.session else "other session")
                f.duplicates[where] += 1
                f.example(f"duplicate ({where})", p.text, examples)
            elif near in first_near:
                f.near_duplicates += 1
                f.example("near_duplicate", p.text, examples)
            first_exact.setdefault(p.text, p)
            first_near.setdefault(near, p)
    return figures


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", default="product,project,beam", help="comma-separated: product, project, beam")
    p.add_argument("--conversations", type=int, default=0, help="only each set's first N conversations (0: all)")
    p.add_argument("--beam-conversations", type=int, default=2,
                   help="beam-dev's first N conversations (its import is long), unless --conversations is given")
    p.add_argument("--reuse-dir", default="", help="keep each set's import here for the next run (same database)")
    p.add_argument("--database-url", default="", help="scratch database (default: SQLite in the run's folder)")
    p.add_argument("--json", dest="json_path")
    p.add_argument("--examples", type=int, default=3, help="examples of each kind of fragment to print")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="the product set's first conversation: shows the bench runs")
    args = p.parse_args(argv)
    args.sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    if args.quick:
        args.sets, args.conversations = ["product"], 1
    unknown = [s for s in args.sets if s not in DATASETS]
    if unknown:
        p.error(f"unknown sets: {unknown}")
    if "beam" in args.sets and not DATASETS["beam"].is_file():
        print(f"no {DATASETS['beam']}: beam-dev left out", file=sys.stderr)
        args.sets.remove("beam")
    args.use_llm = False  # rules only: the counts are about the passages, not a model's extraction
    return args


def _run_set(name: str, args, workdir: Path) -> dict:
    from django.conf import settings

    from infra.tokens import count_tokens
    from memory.models import MemoryKind, MemoryRecord
    from sessions.models import Message

    data = json.loads(DATASETS[name].read_text())
    limit = args.conversations or (args.beam_conversations if name == "beam" else 0)
    if limit:
        data = data[:limit]
    tenant, users_by_sample, import_seconds = locomo.import_or_reuse(
        data=data, shape="assistant", marker=workdir / f"imported-{name}.json" if args.reuse_dir else None,
        tenant_name=f"Fragments bench: {name}")
    messages = list(Message.objects.for_tenant(tenant).values_list("pk", "role", "content", "session_id"))
    role_of = {str(pk): role for pk, role, _, _ in messages}
    sources = {str(pk): content for pk, _, content, _ in messages}
    user_messages = sum(role == "user" for _, role, _, _ in messages)
    rows = list(MemoryRecord.objects.for_tenant(tenant).order_by("created_at", "id")
                .values_list("user_id", "kind", "text", "source_type", "source_message_id", "session_id", "metadata"))
    by_kind: Counter = Counter()
    passages_by_user: dict[str, list[tuple[tuple, Passage]]] = {}
    for user_id, kind, text, source_type, message_id, session_id, metadata in rows:
        role = role_of.get(str(message_id)) if message_id else None
        label = f"event ({role})" if kind == MemoryKind.EVENT and role else kind
        by_kind[label] += 1
        if kind != MemoryKind.EVENT or role not in ROLES:
            continue
        # The speaker's name ("Assistant: ") is the memory's, not the message's.
        _, _, body = text.partition(": ")
        order = (str(message_id), int(metadata.get("passage", 0)))
        passages_by_user.setdefault(str(user_id), []).append(
            (order, Passage(role=role, session=str(session_id), message=str(message_id), text=body)))
    figures = {role: RoleFigures() for role in ROLES}
    for items in passages_by_user.values():
        # Messages in the order they were said, each message's passages in their own order.
        seq = {str(pk): i for i, (pk, _, _, _) in enumerate(messages)}
        items.sort(key=lambda item: (seq.get(item[0][0], 0), item[0][1]))
        judged = passages_judge(sources=sources, passages=[p for _, p in items],
                                bound=settings.MEMORY_PASSAGE_MAX_TOKENS, count_tokens=count_tokens,
                                examples=args.examples)
        for role, f in judged.items():
            into = figures[role]
            for attr in ("passages", "split_messages", "mid_token", "heading_only", "fence_only", "over_bound",
                         "unlocated", "near_duplicates"):
                setattr(into, attr, getattr(into, attr) + getattr(f, attr))
            into.duplicates.update(f.duplicates)
            into.tokens += f.tokens
            for label, texts in f.examples.items():
                for text in texts:
                    into.example(label, text, args.examples)
    for role in ROLES:
        figures[role].messages = sum(r == role for _, r, _, _ in messages)
    return {"set": name, "dataset": str(DATASETS[name]), "conversations": len(data), "user_messages": user_messages,
            "import_seconds": round(import_seconds, 1), "memories": len(rows),
            "rows_per_user_message": round(len(rows) / user_messages, 2) if user_messages else 0.0,
            "rows_per_user_message_by_kind": {k: round(v / user_messages, 2) for k, v in sorted(by_kind.items())}
            if user_messages else {},
            "rows_by_kind": dict(sorted(by_kind.items())),
            "passage_bound_tokens": settings.MEMORY_PASSAGE_MAX_TOKENS,
            "passages": {role: figures[role].as_dict() for role in ROLES}}


def _print(r: dict) -> None:
    print(f"\nfragments, {r['set']} set ({r['conversations']} conversations, {r['user_messages']} user messages, "
          f"{r['memories']} memories, import {r['import_seconds']} s)")
    print(f"rows per user message: {r['rows_per_user_message']:.2f}; by kind: " + ", ".join(
        f"{k} {v:.2f}" for k, v in r["rows_per_user_message_by_kind"].items()))
    print(f"{'':26}" + "".join(f"{role:>12}" for role in ROLES))
    rows = [("messages", "messages"), ("passages", "passages"), ("passages per message", "passages_per_message"),
            ("messages split", "messages_split"), ("mid-token starts", "mid_token"),
            ("heading only", "heading_only"), ("fence only", "fence_only"), ("exact duplicates", "duplicates"),
            ("near duplicates", "near_duplicates"), (f"over {r['passage_bound_tokens']} tokens", "over_bound"),
            ("not located", "unlocated"), ("tokens median", "tokens_median"), ("tokens max", "tokens_max")]
    for label, key in rows:
        print(f"{label:26}" + "".join(f"{r['passages'][role][key]:>12}" for role in ROLES))
    for role in ROLES:
        dup = r["passages"][role]["duplicates_by_first_telling"]
        if dup:
            print(f"{role} exact duplicates by where the first telling is: " + ", ".join(
                f"{k} {v}" for k, v in sorted(dup.items())))
        for label, texts in r["passages"][role]["examples"].items():
            for text in texts:
                print(f"  {role} {label}: {text}")


def main(argv=None) -> dict:
    args = _args(argv)
    workdir = Path(args.reuse_dir).resolve() if args.reuse_dir else Path(tempfile.mkdtemp(prefix="fragments-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    locomo._setup_django(args, workdir)

    import torch

    from infra.embedder import get_embedder, set_embedder

    torch.set_num_threads(max(1, args.torch_threads))
    set_embedder(locomo.CachingEmbedder(get_embedder()))
    results = {}
    for name in args.sets:
        results[name] = _run_set(name, args, workdir)
        _print(results[name])
    report_write(results, args.json_path, ensure_ascii=False)
    return results


if __name__ == "__main__":
    main()
