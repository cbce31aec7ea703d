"""The import direction of the code base (DESIGN.md, "Layers"): every import, module-level or inside a function,
points down the layers, and memory and the sessions app never import each other.

    surfaces         config, ops, mcp_server: may import anything below
    (an API view, URL conf or management command has its package's layer: it lives in the package whose services
    it calls, so a view of a flow that orchestration owns lives in orchestration/apis/)
    assistant        assistant mode: the ReAct loop, its tools, the OpenAI protocol
    orchestration    a message's and a turn's fan-out across the packages
    context          buffer, anchors, bridges, links, composer
    memory | sessions   siblings: neither imports the other
    webhooks         per-tenant endpoints and signed deliveries: every layer above emits its events here
    tenants          tenancy: tenants, keys, end users, scoped managers
    infra            core adapters: errors, clock, tokens, Redis, LLM client, embedder, vector store
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = {"assistant": 1, "orchestration": 2, "context": 3, "memory": 4, "sessions": 4, "webhooks": 5, "tenants": 6,
          "infra": 7}
SURFACE_PACKAGES = {"config", "ops", "mcp_server"}  # mcp_server: the MCP surface at /mcp
# Admin registrations still read across the apps they show; they move to the package that owns them next.
SURFACE_MODULE = re.compile(r"(^|\.)admin(\.|$)")
SIBLINGS = {("memory", "sessions"), ("sessions", "memory")}
PACKAGES = set(LAYERS) | SURFACE_PACKAGES


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[str, int]]:
    """(imported module, line) for every import in the file, relative ones resolved."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((target, node.lineno))
    return found


def violation(importer: str, imported: str) -> str | None:
    """Why `importer` may not import `imported`, or None when the import points the right way."""
    src, dst = importer.split(".")[0], imported.split(".")[0]
    if dst not in PACKAGES or src == dst:
        return None
    if dst == "config":
        return "config is the composition root (settings, URL conf, Celery app): nothing imports it"
    if (src, dst) in SIBLINGS:
        return f"{src} and {dst} never import each other (what crosses them lives in orchestration)"
    if src in SURFACE_PACKAGES or SURFACE_MODULE.search(importer):
        return None
    if dst in SURFACE_PACKAGES:
        return f"{dst} is a surface; only surfaces import it"
    if src not in LAYERS:
        return None
    if LAYERS[dst] <= LAYERS[src]:
        return f"{src} (layer {LAYERS[src]}) may not import {dst} (layer {LAYERS[dst]}): dependencies point down"
    return None


def project_files():
    for package in sorted(PACKAGES):
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def test_every_import_points_down_the_layers():
    problems = []
    for path in project_files():
        importer = module_name(path)
        for imported, line in imports_of(path):
            why = violation(importer, imported)
            if why:
                problems.append(f"{path.relative_to(ROOT)}:{line} imports {imported}: {why}")
    assert not problems, "imports against the layers:\n" + "\n".join(problems)


def test_the_scan_sees_every_package_and_function_level_imports():
    files = list(project_files())
    assert {module_name(p).split(".")[0] for p in files} == PACKAGES
    inner = [i for p in files if module_name(p) == "memory.retrieval" for i in imports_of(p) if i[0] == "infra.llm"]
    assert inner, "function-level imports are part of the graph (memory.retrieval imports the LLM client lazily)"


def import_graph() -> dict[str, set[str]]:
    """Project module -> the project modules it imports (module-level or inside functions)."""
    modules = {module_name(p): p for p in project_files()}
    graph = {}
    for name, path in modules.items():
        targets = set()
        for imported, _ in imports_of(path):
            # "from pkg import mod" names a module or a symbol: take the longest module prefix that exists
            parts = imported.split(".")
            for n in range(len(parts), 0, -1):
                if ".".join(parts[:n]) in modules:
                    targets.add(".".join(parts[:n]))
                    break
        graph[name] = targets - {name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each a circle of imports."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_round_a_circle():
    # A package __init__ that re-exports its own modules is not a circle of behaviour: leave those edges out.
    graph = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in import_graph().items()}
    assert import_cycles(graph) == []


def test_the_circle_finder_sees_a_circle_through_a_function_level_import():
    assert import_cycles({"a.services": {"a.tasks"}, "a.tasks": {"a.services"}, "b": {"a.tasks"}}) == [
        ["a.services", "a.tasks"]]


@pytest.mark.parametrize("importer, imported", [
    ("memory.retrieval", "sessions.models"),  # the siblings
    ("sessions.services", "memory.extraction.classify"),
    ("sessions.admin", "memory.models"),  # even from a surface module of the two
    ("memory.extraction.pipeline", "context.buffer"),  # upwards
    ("context.composer", "orchestration.context"),
    ("tenants.services", "orchestration.erasure"),
    ("infra.health", "memory.models"),
    ("infra.checks", "config.celery"),
    ("assistant.tools", "mcp_server.server"),  # a surface is imported by surfaces only
    ("orchestration.messages", "assistant.turns"),
    ("webhooks.events", "memory.models"),  # webhooks hear of changes; they never reach up for them
    ("webhooks.delivery", "sessions.models"),
    ("tenants.services", "webhooks.events"),
    # the imports that climbed from API modules inside low packages: a view's file name exempts nothing
    ("sessions.apis", "orchestration.messages"),
    ("context.apis", "orchestration.context"),
    ("memory.apis.controls", "orchestration.erasure"),
    ("tenants.apis", "orchestration.erasure"),
    ("sessions.management.commands.import_conversations", "orchestration.imports"),
    ("ops.health", "config.celery"),
])
def test_an_import_against_the_direction_is_refused(importer, imported):
    assert violation(importer, imported)


@pytest.mark.parametrize("importer, imported", [
    ("orchestration.messages", "context.buffer"), ("context.buffer", "memory.selectors"),
    ("context.links", "sessions.models"), ("memory.actions", "tenants.selectors"), ("tenants.scoping", "django.db"),
    ("orchestration.apis.sessions", "orchestration.messages"), ("tenants.admin", "memory.models"),
    ("config.urls", "ops.health"),
    ("mcp_server.server", "orchestration.context"), ("config.asgi", "mcp_server.asgi"),
    ("memory.actions", "webhooks.events"), ("context.bridge", "webhooks.events"), ("webhooks.events", "tenants.models"),
])
def test_an_import_along_the_direction_is_allowed(importer, imported):
    assert violation(importer, imported) is None
