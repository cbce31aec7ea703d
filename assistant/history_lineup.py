"""Where a chat client's resent conversation stands against what a session already holds.

A chat UI resends its whole conversation with every request; some drop its oldest turns, a retry or "regenerate"
sends the same conversation again, an edited message branches it, and a new chat starts another. Lining the
client's turns up with the session's tells them apart, by position and content only (no ids cross the protocol).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Same = Callable[[int, int], bool]  # (stored index, sent index) -> the same turn


@dataclass(frozen=True)
class LineUp:
    """`kind`: "repeat" (the input is the session's last user message, sent again after the same history: a retry or
    a regenerate), "continues" (the client's turns overlap the session's), "fresh" (the session holds nothing) or
    "apart" (nothing lines up: another conversation). `new_from`: the first of the client's earlier turns the session
    lacks. `repeat_of`: the stored index of the repeated user message."""
    kind: str
    new_from: int = 0
    repeat_of: int | None = None


def line_up(*, stored_roles: list[str], n_sent: int, same: Same, same_input: Callable[[int], bool],
            history_shown: bool) -> LineUp:
    """Line the client's earlier turns (n_sent of them, compared through `same`) and its input up with the
    session's stored turns (oldest first). `history_shown`: the client sends its conversation rather than only the
    newest message, so an input equal to the last one with no history before it is a regenerate of the session's
    first turn, not a user saying the same thing again ("continue", "yes")."""
    n_stored = len(stored_roles)
    if n_stored == 0:
        return LineUp("fresh")
    last_user = next((k for k in range(n_stored - 1, -1, -1) if stored_roles[k] == "user"), None)
    if last_user is not None and same_input(last_user):
        answered = last_user < n_stored - 1
        before = min(n_sent, last_user)
        aligned = all(same(last_user - before + i, n_sent - before + i) for i in range(before))
        if not answered:
            # A retry after the model failed: the input is already stored; what came before it lines up as usual.
            found = _overlap(n_stored=last_user, n_sent=n_sent, same=same)
            if found.kind != "apart" or n_sent == 0:
                return LineUp("repeat", new_from=found.new_from, repeat_of=last_user)
            return found
        if aligned and (before > 0 or (last_user == 0 and n_sent == 0 and history_shown)):
            return LineUp("repeat", new_from=n_sent, repeat_of=last_user)
    return _overlap(n_stored=n_stored, n_sent=n_sent, same=same)


def _overlap(*, n_stored: int, n_sent: int, same: Same) -> LineUp:
    if n_stored == 0:
        return LineUp("fresh")
    if n_sent == 0:
        return LineUp("apart")
    # The client's first turns are the session's last ones: what follows them is new.
    for size in range(min(n_stored, n_sent), 0, -1):
        start = n_stored - size
        if all(same(start + i, i) for i in range(size)):
            return LineUp("continues", new_from=size)
    # The client's turns are held whole further back: an edited message branches the conversation there.
    for start in range(n_stored - n_sent - 1, -1, -1):
        if all(same(start + i, i) for i in range(n_sent)):
            return LineUp("continues", new_from=n_sent)
    return LineUp("apart")
