"""The import direction of the code base (DESIGN.md, "Layers"): every import, module-level or inside a function,
points down the layers, and memory and the sessions app never import each other.

    surfaces         config, ops, mcp_server, backoffice: may import anything below
    (an API view, URL conf, management command or admin module has its package's layer: it lives in the package
    whose services it calls, so a view of a flow that orchestration owns lives in orchestration/apis/, and an admin
    page that reads across apps lives in backoffice/admin/)
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
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = {"assistant": 1, "orchestration": 2, "context": 3, "memory": 4, "sessions": 4, "webhooks": 5, "tenants": 6,
          "infra": 7}
# mcp_server: the MCP surface at /mcp; backoffice: the staff admin's pages that read across apps
SURFACE_PACKAGES = {"config", "ops", "mcp_server", "backoffice"}
SIBLINGS = {("memory", "sessions"), ("sessions", "memory")}
PACKAGES = set(LAYERS) | SURFACE_PACKAGES


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, source: str | None = None) -> list[tuple[str, int]]:
    """(imported module, line) for every import in the file (or in `source`, read as that file), relative ones
    resolved."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text() if source is None else source, filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((_from_target(package, node), node.lineno))
    return found


def _from_target(package: str, node: ast.ImportFrom) -> str:
    """The module a "from ... import" reads from, relative imports resolved against the importer's package."""
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def violation(importer: str, imported: str) -> str | None:
    """Why `importer` may not import `imported`, or None when the import points the right way."""
    src, dst = importer.split(".")[0], imported.split(".")[0]
    if dst not in PACKAGES or src == dst:
        return None
    if dst == "config":
        return "config is the composition root (settings, URL conf, Celery app): nothing imports it"
    if (src, dst) in SIBLINGS:
        return f"{src} and {dst} never import each other (what crosses them lives in orchestration)"
    if src in SURFACE_PACKAGES:
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


def layer_problems(path: Path, source: str | None = None) -> list[str]:
    """Every import of the file (or of `source`, read as that file) that points against the layers, with the line
    and the reason."""
    importer = module_name(path)
    return [f"{path.relative_to(ROOT)}:{line} imports {imported}: {why}"
            for imported, line in imports_of(path, source) if (why := violation(importer, imported))]


def test_every_import_points_down_the_layers():
    problems = [problem for path in project_files() for problem in layer_problems(path)]
    assert not problems, "imports against the layers:\n" + "\n".join(problems)


def test_an_admin_import_put_back_fails_the_scan():
    """No module is exempt by its file name: tenants/admin.py reaching up to memory again (as its end user page did
    before the page moved to backoffice/) is reported like any other climbing import."""
    path = ROOT / "tenants" / "admin.py"
    assert layer_problems(path) == []
    climbed = path.read_text() + "\n\ndef _memory_model():\n    from memory.models import MemoryRecord\n"
    line = climbed[:climbed.index("from memory.models")].count("\n") + 1
    assert layer_problems(path, climbed) == [
        f"tenants/admin.py:{line} imports memory.models: tenants (layer 6) may not import memory (layer 4): "
        "dependencies point down"]


def test_the_scan_sees_every_package_and_function_level_imports():
    files = list(project_files())
    assert {module_name(p).split(".")[0] for p in files} == PACKAGES
    inner = [i for p in files if module_name(p) == "memory.retrieval_query" for i in imports_of(p)
             if i[0] == "infra.llm"]
    assert inner, "function-level imports are part of the graph (memory.retrieval_query imports the LLM client lazily)"


def _imported_names(path: Path) -> list[str]:
    """What the file imports, each "from pkg import name" also as "pkg.name", so `from . import mod` is an edge to
    the module and not to its package."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _from_target(package, node)
            names += [target] + [f"{target}.{alias.name}" for alias in node.names]
    return names


def import_graph() -> dict[str, set[str]]:
    """Project module -> the project modules it imports (module-level or inside functions)."""
    modules = {module_name(p): p for p in project_files()}
    graph = {}
    for name, path in modules.items():
        targets = set()
        for imported in _imported_names(path):
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


def test_the_graph_sees_a_module_imported_from_its_package():
    # backoffice/admin/__init__.py registers the review queue with "from . import ..., review, ..."
    assert "backoffice.admin.review" in import_graph()["backoffice.admin"]


def test_the_circle_finder_sees_a_circle_through_a_function_level_import():
    assert import_cycles({"a.services": {"a.tasks"}, "a.tasks": {"a.services"}, "b": {"a.tasks"}}) == [
        ["a.services", "a.tasks"]]


@pytest.mark.parametrize("importer, imported", [
    ("memory.retrieval", "sessions.models"),  # the siblings
    ("sessions.services", "memory.extraction.classify"),
    ("sessions.admin", "memory.models"),
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
    # the imports that climbed from the admin modules of low packages: an admin's file name exempts nothing either
    ("tenants.admin", "memory.models"),
    ("tenants.admin", "sessions.selectors"),
    ("tenants.admin", "orchestration.erasure"),
    ("memory.admin", "orchestration.receipts"),
    ("memory.admin_review", "orchestration.models"),
    ("sessions.admin", "assistant.tools"),
    ("sessions.admin", "context.bridge_support"),
    ("sessions.admin", "orchestration.transcript"),
    ("tenants.admin", "backoffice.admin.tenants"),  # the admin surface is imported by surfaces only
])
def test_an_import_against_the_direction_is_refused(importer, imported):
    assert violation(importer, imported)


@pytest.mark.parametrize("importer, imported", [
    ("orchestration.messages", "context.buffer"), ("context.buffer", "memory.selectors"),
    ("context.links", "sessions.models"), ("memory.actions", "tenants.selectors"), ("tenants.scoping", "django.db"),
    ("orchestration.apis.sessions", "orchestration.messages"), ("config.urls", "ops.health"),
    ("memory.admin", "tenants.admin"), ("webhooks.admin", "tenants.admin"), ("orchestration.admin", "tenants.admin"),
    ("backoffice.admin.tenants", "memory.models"), ("backoffice.admin.tenants", "orchestration.erasure"),
    ("backoffice.admin.sessions", "assistant.tools"), ("backoffice.admin.memories", "orchestration.receipts"),
    ("mcp_server.server", "orchestration.context"), ("config.asgi", "mcp_server.asgi"),
    ("memory.actions", "webhooks.events"), ("context.bridge", "webhooks.events"), ("webhooks.events", "tenants.models"),
])
def test_an_import_along_the_direction_is_allowed(importer, imported):
    assert violation(importer, imported) is None
