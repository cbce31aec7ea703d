"""The session's goal follows the user's own changes: "change the destination to Newark" rewrites the destination in
the goal whether or not the model calls a tool (a small model often answers "Understood." and calls none)."""
from __future__ import annotations

import re

from memory.extraction.rules import slot_values


def goal_revise(goal: str, changes: list[tuple[str, str]]) -> str:
    """The goal with each changed slot (slot, new value; memory.extraction.rules.slot_changes) set to its new value:
    the old value replaced where the goal names it, else the change added to the goal in a few words."""
    for slot, new in changes:
        if not goal or new.lower() in goal.lower():
            continue
        olds = [old for old in slot_values(goal).get(slot, []) if old.lower() != new.lower()]
        revised = goal
        for old in olds:
            revised = re.sub(rf"\b{re.escape(old)}\b", new, revised)
        goal = revised if revised != goal else f"{goal.rstrip()} ({slot} now {new})"
    return goal
