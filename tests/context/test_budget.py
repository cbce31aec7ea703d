"""The token budget: one module computes every section's share and hands each its allowance."""
from __future__ import annotations

import re
from pathlib import Path

from context.budget import ContextBudget, as_budget, memory_section_allowance, profile_share, tool_tokens
from context.memory_section import memory_section_overhead

ROOT = Path(__file__).resolve().parents[2]
# What a share is computed from: read by context/budget.py alone (settings define them; benches report them).
_BUDGET_INPUTS = re.compile(r"CONTINUUM_(CONTEXT_BUDGET|CONTEXT_CAPS|PROFILE_MAX_TOKENS)\b|memory_section_overhead\(")
_OUTSIDE = {"tests", "config", "bench", "docs", "scripts", ".venv"}


def test_only_the_budget_module_computes_a_share():
    readers = {str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
               if p.relative_to(ROOT).parts[0] not in _OUTSIDE and _BUDGET_INPUTS.search(p.read_text())}
    assert readers == {"context/budget.py", "context/memory_section.py"}


def test_retrieval_gets_the_memory_cap_less_the_framing(settings):
    settings.CONTINUUM_CONTEXT_CAPS = {**settings.CONTINUUM_CONTEXT_CAPS, "memories": 800}
    assert ContextBudget.default(4000).retrieval_allowance() == 800 - memory_section_overhead()
    assert ContextBudget.default(500).retrieval_allowance() == 500 - memory_section_overhead()
    assert ContextBudget(total=4000, caps={}).retrieval_allowance() < 0  # no memories cap: nothing retrieved


def test_the_profile_keeps_to_a_quarter_of_a_small_budget(settings):
    settings.CONTINUUM_PROFILE_MAX_TOKENS = 250
    assert profile_share(4000) == 250 and profile_share(600) == 150
    assert ContextBudget.default(600).profile_limit() == 150 and ContextBudget.default(600).profile_limit(90) == 90
    assert memory_section_allowance(1000, profile_tokens=200) == 800 - memory_section_overhead()


def test_a_clients_tools_come_on_top_of_the_budget(settings):
    tools = [{"type": "function", "function": {"name": "search_web", "parameters": {"type": "object"}}}]
    plan = ContextBudget.with_client_tools(tools)
    assert plan.total == settings.CONTINUUM_CONTEXT_BUDGET + tool_tokens(tools) > settings.CONTINUUM_CONTEXT_BUDGET
    assert as_budget(None) == ContextBudget.default() and as_budget(1234).total == 1234 and as_budget(plan) is plan
