"""Long messages as passages: bounded, structure-aware chunks, so retrieval can return the part of a message that
answers and a token budget holds several messages instead of one long one.

The bound comes from the embedding model, not from any conversation: all-MiniLM-L6-v2 reads 256 word pieces and
ignores the rest, so an episodic memory longer than that is searchable by its opening alone. A passage stays well
inside the window (word pieces run ~1.2-1.4 per tiktoken token in English prose, more in code), and a message that
fits in one passage is kept whole.

A passage is a run of whole units of the text, cut only at its own edges, the strongest one available: before a
heading, then at a paragraph or a code block's edge, then at a line that ends a sentence or starts a list item, then
between sentences. Only a sentence or a line of code longer than a passage is cut between words (at whitespace,
never inside a word, an identifier or a number); only a run of characters with no whitespace longer than a passage
(an encoded blob) is cut inside. A passage ends at the strongest edge that leaves it at least three fifths full (the
first such edge: a passage of one topic embeds more sharply than one filled with the start of the next), or less
full at a section's or a paragraph's edge rather than inside a paragraph or a statement of code, never as a stub.
Prose and a code block of more than a line or two are not packed into one passage when each is more than a stub: a
passage of both embeds as neither, and a budget pays for the code when the prose answers.

What heads something joins it: a heading (up to half a passage long), a list item that only names what follows
("2. **Configure the runner**"), and a short line that ends in a colon ("Here is the route:") are never the last
thing in a passage; a unit with nothing readable in it (an empty block, a rule) goes with what follows, and a line of
code with nothing readable (a closing "});") with what precedes it. A code block longer than a passage is cut at line
edges (at blank lines first, then between statements rather than inside one's indented body), and each part is
fenced as the block is (its opening line with the language, and a closing fence), so every part reads as code. The
same text twice in one message (a repeated snippet, a repeated heading and its lines) is one passage.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings

from infra.sentences import sentence_spans
from infra.tokens import count_tokens

# Edges, strongest first: what a cut prefers when it has a choice.
_SECTION, _BLOCK, _LINE, _SENTENCE, _WORD = 4, 3, 2, 1, 0

# A fence is three or more backticks (whose info string holds none) or tildes (CommonMark), at any indentation: chat
# Markdown indents a block under the list item it belongs to.
_FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}(?=[^`]*$)|~{3,})")
# An ATX heading, or a line that is all bold (a heading in chat-model Markdown: "**Step 2: the routes**").
_HEADING = re.compile(r"^ {0,3}(?:#{1,6}(?:[ \t].*)?|\*\*[^*\n]+\*\*:?|__[^_\n]+__:?)[ \t]*$")
# A list item that only names what follows ("3. **Configure the runner**"): it heads its sub-items as a heading does.
_LABEL = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+(?:\*\*[^*\n]+\*\*|__[^_\n]+__):?[ \t]*$")
_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)]|\|)\s?")
# A line that ends like this ends what it says: the next line is a new one, not the same sentence wrapped.
_ENDS = re.compile(r"""[.!?:;…)\]}"'*`|]\s*$""")
_READABLE = re.compile(r"[^\W_]{2,}")


@dataclass
class _Block:
    """A code block cut into parts: what each part is fenced with."""

    opener: str
    closer: str
    opener_tokens: int  # what the fence lines add to a part that lacks them, their line breaks counted
    closer_tokens: int

    @property
    def overhead(self) -> int:
        return self.opener_tokens + self.closer_tokens


@dataclass
class _Atom:
    """A unit a passage is made of: text[start:end], never cut."""

    start: int
    end: int
    tokens: int
    edge: int  # how strong the edge before it is
    glue: bool = False  # heads what follows: never the last unit of a passage
    trails: bool = False  # ends what precedes it (a closing brace): never the first unit of a passage
    block: _Block | None = None  # the code block it is a part of, when that block is cut
    opens: bool = False  # holds its block's opening fence
    closes: bool = False  # holds its block's closing fence (or ends an unclosed block)
    code: int = 0  # the code block (numbered from 1) it is all or part of, when that block is not a line or two


def passages_split(text: str) -> list[str]:
    """The text as one passage when it fits the bound, else its passages in order (none blank, none twice)."""
    high = settings.MEMORY_PASSAGE_MAX_TOKENS
    if count_tokens(text) <= high:
        return [text]
    atoms = _atoms(text, high)
    if not atoms:
        return [text]
    out, seen = [], set()
    for i, k in _cuts(atoms, high, lambda i, k: count_tokens(_render(text, atoms[i:k])) <= high):
        passage = _render(text, atoms[i:k])
        key = " ".join(passage.split())
        if key and key not in seen:
            seen.add(key)
            out.append(passage)
    return out or [text]


def _lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of every line, its line break left out."""
    spans, at = [], 0
    for line in text.splitlines(keepends=True):
        spans.append((at, at + len(line.rstrip("\r\n"))))
        at += len(line)
    return spans


def _atoms(text: str, high: int) -> list[_Atom]:
    lines = _lines(text)
    atoms: list[_Atom] = []
    edge, previous = _SECTION, ""  # the edge before the next unit; the last line of text seen
    i = 0
    while i < len(lines):
        start, end = lines[i]
        line = text[start:end]
        if not line.strip():
            edge = max(edge, _BLOCK)
            i += 1
            continue
        room = high - _carried(atoms)
        fence = _FENCE_OPEN.match(line)
        if fence:
            i = _code(text, lines, i, fence.group("fence"), max(edge, _BLOCK), room, high, atoms)
            edge, previous = _BLOCK, ""
            continue
        if _HEADING.match(line) or _LABEL.match(line):
            tokens = count_tokens(line)
            level = _SECTION if _HEADING.match(line) else max(edge, _LINE)
            # Headings go with what they head while they leave it half a passage; a "heading" longer than that is a
            # paragraph in heading's clothes.
            atoms.append(_Atom(start, end, tokens, level, glue=_carried(atoms) + tokens <= high // 2))
            edge, previous = _LINE, ""
            i += 1
            continue
        if edge < _BLOCK:
            edge = _LINE if _ITEM.match(line) or not previous or _ENDS.search(previous) else _WORD
        ahead = len(atoms)
        atoms += _text_atoms(text, start, end, edge, room, high)
        last = atoms[-1]
        # A short line that introduces what follows ("The route becomes:") goes with it.
        if len(atoms) > ahead and line.rstrip().endswith(":") and _carried(atoms[:-1]) + last.tokens <= high // 3:
            last.glue = True
        edge, previous = _LINE, line
        i += 1
    for atom in atoms:
        if _readable(text[atom.start:atom.end]):
            continue
        # Nothing to read on its own: a line of code such as "});" ends what precedes it (an opening "{" heads what
        # follows), and a rule or an empty block goes with what follows.
        if atom.block is not None and not atom.opens:
            atom.trails = True
        else:
            atom.glue = True
    return atoms


def _readable(text: str) -> bool:
    """Whether the text holds a word (two letters or digits) besides its fence lines."""
    return any(_READABLE.search(line) for line in text.splitlines() if not _FENCE_OPEN.match(line))


def _carried(atoms: list[_Atom]) -> int:
    """Tokens of the units at the end that head what comes next: the room they take from it."""
    carried = 0
    for atom in reversed(atoms):
        if not atom.glue:
            break
        carried += atom.tokens + 1
    return carried


def _code(text: str, lines: list[tuple[int, int]], i: int, fence: str, edge: int, room: int, high: int,
          atoms: list[_Atom]) -> int:
    """The fenced block opening at line i, as one unit when it fits, else as parts of whole lines (each fenced when
    it becomes a passage's edge); the index of the line after the block."""
    closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
    j = i + 1
    while j < len(lines) and not closing.match(text[lines[j][0]:lines[j][1]]):
        j += 1
    closed = j < len(lines)
    last = j if closed else len(lines) - 1
    start, end = lines[i][0], lines[last][1]
    tokens = count_tokens(text[start:end])
    # A block of more than a line or two is kept apart from the prose around it (`_cuts`).
    code = 1 + max((a.code for a in atoms), default=0) if tokens >= high // 5 else 0
    if tokens <= room:
        atoms.append(_Atom(start, end, tokens, edge, code=code))
        return last + 1
    opener = text[lines[i][0]:lines[i][1]].strip()
    closer = fence[0] * len(fence)
    block = _Block(opener, closer, count_tokens(opener) + 1, count_tokens(closer) + 1)
    body = lines[i + 1:j]
    parts: list[_Atom] = []
    blank, indent = False, 0
    for s, e in body:
        line = text[s:e]
        if not line.strip():
            blank = True
            continue
        # Between statements, not inside one's body: a line indented deeper than the one before it goes on with it.
        depth = len(line) - len(line.lstrip())
        line_edge = _BLOCK if blank else _LINE if depth <= indent else _SENTENCE
        blank, indent = False, depth
        # What heads the block takes its room from the first line only.
        parts += _long_atoms(text, s, e, line_edge, (high if parts else room) - block.overhead)
    if not parts:  # a block of blank lines only: one unit
        atoms.append(_Atom(start, end, tokens, edge))
        return last + 1
    for part in parts:
        part.block, part.code = block, code
    parts[0].start, parts[0].edge, parts[0].opens = start, edge, True
    parts[0].tokens = count_tokens(text[parts[0].start:parts[0].end])
    parts[-1].end, parts[-1].closes = end, True
    parts[-1].tokens = count_tokens(text[parts[-1].start:parts[-1].end])
    atoms += parts
    return last + 1


def _text_atoms(text: str, start: int, end: int, edge: int, room: int, high: int) -> list[_Atom]:
    """A line of text: whole when it fits, else its sentences, a sentence too long for a passage cut at words (the
    first within `room`, what is left of a passage after what heads it, the others within `high`)."""
    tokens = count_tokens(text[start:end])
    if tokens <= room:
        return [_Atom(start, end, tokens, edge)]
    out: list[_Atom] = []
    item = _ITEM.match(text[start:end])  # a list item's number is not a sentence of its own ("1.")
    skip = start + item.end() if item else start
    for n, (a, b) in enumerate(sentence_spans(text[skip:end])):
        a, b = (start if n == 0 else skip + a), skip + b
        while a < b and text[a].isspace():
            a += 1
        out += _long_atoms(text, a, b, edge if n == 0 else _SENTENCE, room if n == 0 else high)
    return out


def _long_atoms(text: str, start: int, end: int, edge: int, room: int) -> list[_Atom]:
    """text[start:end] as one unit when it fits, else as runs of whole words that do (a word longer than that, with
    no whitespace to cut at, in pieces)."""
    tokens = count_tokens(text[start:end])
    if tokens <= room:
        return [_Atom(start, end, tokens, edge)]
    out: list[_Atom] = []
    run_start, run_tokens = None, 0
    for word in re.finditer(r"\S+", text[start:end]):
        a, b = start + word.start(), start + word.end()
        n = count_tokens(text[a:b]) + 1
        if run_start is not None and run_tokens + n > room:
            out.append(_Atom(run_start, a, count_tokens(text[run_start:a].rstrip()), edge if not out else _WORD))
            run_start, run_tokens = None, 0
        if n > room:
            out += [_Atom(s, e, count_tokens(text[s:e]), edge if not out else _WORD)
                    for s, e in _pieces(text, a, b, room)]
            continue
        if run_start is None:
            run_start = a
        run_tokens += n
    if run_start is not None:
        out.append(_Atom(run_start, end, count_tokens(text[run_start:end]), edge if not out else _WORD))
    for atom in out:
        atom.end = atom.start + len(text[atom.start:atom.end].rstrip())
    return out


def _pieces(text: str, start: int, end: int, room: int) -> list[tuple[int, int]]:
    """A run with no whitespace in it, longer than `room` tokens, in consecutive pieces that each fit."""
    out = []
    while start < end:
        size = min(end - start, 8 * room)  # no token is longer than 8 characters in practice: a bounded first guess
        while size > 1 and count_tokens(text[start:start + size]) > room:
            size = max(1, size * 3 // 4)
        out.append((start, start + size))
        start += size
    return out


def _cost(atoms: list[_Atom], i: int, k: int) -> int:
    """Tokens of a passage of atoms[i:k], with the fences it needs when it starts or ends inside a code block."""
    tokens = sum(a.tokens for a in atoms[i:k]) + (k - i - 1)
    first, last = atoms[i], atoms[k - 1]
    if first.block is not None and not first.opens:
        tokens += first.block.opener_tokens
    if last.block is not None and not last.closes:
        tokens += last.block.closer_tokens
    return tokens


def _cuts(atoms: list[_Atom], high: int, fits) -> list[tuple[int, int]]:
    """Where the passages begin and end: each as full as the bound allows, cut at the best edge (`_score`); never
    right after a unit that heads the next, nor right before one that ends the last (nor before the message's last
    units when they only head, since nothing follows them). `fits(i, k)`: whether atoms[i:k] as a passage is
    within the bound."""
    n = len(atoms)
    tail = n
    while tail > 0 and atoms[tail - 1].glue:
        tail -= 1

    def can_cut(k: int) -> bool:
        return k == n or (0 < k < tail and not atoms[k - 1].glue and not atoms[k].trails)

    low, least = high * 3 // 5, high // 5
    # What each unit belongs to: its code block, or the block that what heads it (a heading, "Here is the route:")
    # leads into; 0 for prose. A passage is not filled across a change of owner when both sides are more than a
    # stub: prose beside code is embedded as neither, and costs a budget the code's tokens when the prose answers.
    owner = [a.code for a in atoms]
    for m in range(n - 2, -1, -1):
        if atoms[m].glue and not owner[m]:
            owner[m] = owner[m + 1]
    out, i = [], 0
    while i < n:
        j = i + 1
        while j < n and _cost(atoms, i, j + 1) <= high:
            j += 1
        if j == n and fits(i, n):
            k = n
        else:
            # Best cut first. The count of units is an estimate (two texts joined may tokenize a token apart): the
            # passage's own text is counted, and the next best cut taken while it does not fit.
            ranked = sorted((k for k in range(i + 1, j + 1) if can_cut(k)),
                            key=lambda k: (_score(atoms, i, k, low, least), _fill(atoms, i, k, low)), reverse=True)
            k = next((k for k in ranked if fits(i, k)), ranked[0] if ranked else None)
            if k is None:  # everything here heads what follows: it goes with the next unit, past the bound
                k = next((k for k in range(j + 1, n + 1) if can_cut(k)), n)
        k = next((m for m in range(i + 1, k) if owner[m - 1] != owner[m] and can_cut(m)
                  and _cost(atoms, i, m) >= least and (k < n or _cost(atoms, m, n) >= least)), k)
        out.append((i, k))
        i = k
    return out


def _fill(atoms: list[_Atom], i: int, k: int, low: int) -> int:
    """Between cuts at equally strong edges: the first that makes the passage three fifths full, else the fullest.
    A passage of one topic embeds more sharply than one filled to the bound with the start of the next."""
    return -k if _cost(atoms, i, k) >= low else k


def _score(atoms: list[_Atom], i: int, k: int, low: int, least: int) -> float:
    """How good a cut before atoms[k] is for a passage from atoms[i]: the stronger the edge the better, and a passage
    under three fifths full only for a strong edge (a section's start rather than a line's, a paragraph's rather than
    a sentence's inside), never a stub."""
    cost = _cost(atoms, i, k)
    edge = atoms[k].edge if k < len(atoms) else _SECTION + 1
    return edge if cost >= low else edge - 1.5 if cost >= least else -9


def _render(text: str, atoms: list[_Atom]) -> str:
    """The passage's text: the message's own words from its first unit to its last, fenced where it starts or ends
    inside a code block."""
    first, last = atoms[0], atoms[-1]
    body = text[first.start:last.end]
    if first.block is not None and not first.opens:
        body = f"{first.block.opener}\n{body}"  # the line's indentation stays: it is code
    else:
        body = body.lstrip()
    body = body.rstrip()
    if last.block is not None and not last.closes:
        body = f"{body}\n{last.block.closer}"
    return body
