"""The token budget of a composed context: the total, each section's share of it, and the allowances it hands down
(what retrieval may fill, what the profile may show, what a client's tools add). Nothing else computes a share."""
from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings

from infra.tokens import count_tokens

from .memory_section import memory_section_overhead

SECTIONS = ("system", "profile", "bridge", "anchors", "state", "memories", "recent")  # highest priority first


def tool_tokens(tools: list[dict]) -> int:
    """What tool definitions cost in a context, as the composer counts them."""
    return count_tokens(json.dumps(tools, separators=(",", ":"))) if tools else 0


def profile_share(total: int) -> int:
    """The profile's share of a budget of `total` tokens: its configured cap, and never more than a quarter of the
    total, so what the turn retrieves keeps most of a small budget."""
    return max(0, min(settings.CONTINUUM_PROFILE_MAX_TOKENS, total // 4))


@dataclass(frozen=True)
class ContextBudget:
    """A context's total and each section's cap; the composer renders each section within section_limit and shrinks
    the lowest-priority ones when the whole is still over the total."""

    total: int
    caps: dict

    @classmethod
    def default(cls, total: int | None = None) -> ContextBudget:
        total = int(total or settings.CONTINUUM_CONTEXT_BUDGET)
        configured = settings.CONTINUUM_CONTEXT_CAPS or {}
        # The profile is a summary shown on every turn: bounded even where the configured caps predate it.
        defaults = {"profile": settings.CONTINUUM_PROFILE_MAX_TOKENS}
        return cls(total=total, caps={s: int(configured.get(s, defaults.get(s, total))) for s in SECTIONS})

    @classmethod
    def with_client_tools(cls, client_tools: list[dict]) -> ContextBudget:
        """The default budget with a client's own tools on top: a chat UI that offers dozens of them (Open WebUI's
        built-ins are ~5,000 tokens) pays for them itself and still gets the whole memory budget, never a refusal."""
        return cls.default(settings.CONTINUUM_CONTEXT_BUDGET + tool_tokens(client_tools))

    def section_limit(self, section: str) -> int:
        """A section's first allowance: its cap, never more than the total."""
        return min(self.caps.get(section, self.total), self.total)

    def profile_limit(self, limit: int | None = None) -> int:
        """What the standing profile may show: its section's limit (or `limit`, when the composer shrinks it), never
        more than its share of the total (profile_share)."""
        return min(self.section_limit("profile") if limit is None else limit, profile_share(self.total))

    def retrieval_allowance(self) -> int:
        """What the budget gives retrieval: the memory section's cap (none when the plan names no memories cap)
        less the section's framing, which is outside what retrieval fills."""
        return min(self.caps.get("memories", 0), self.total) - memory_section_overhead()


def as_budget(budget) -> ContextBudget:
    """A ContextBudget from None (the configured default), a total in tokens, or a ContextBudget."""
    if budget is None:
        return ContextBudget.default()
    if isinstance(budget, ContextBudget):
        return budget
    return ContextBudget.default(int(budget))


def memory_section_allowance(section_tokens: int, *, profile_tokens: int = 0) -> int:
    """What retrieval may fill in a memory section of `section_tokens` on its own (the benches' budget): what the
    profile shown in it and the section's framing leave."""
    return section_tokens - profile_tokens - memory_section_overhead()


def closing_note_profile_limit() -> int:
    """The standing profile repeated in a turn's closing note (assistant mode), outside the composed context: the
    entries the context showed, within the profile's configured cap."""
    return settings.CONTINUUM_PROFILE_MAX_TOKENS
