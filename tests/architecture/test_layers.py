"""The import direction of the code base (DESIGN.md, "Layers"): every import, module-level or inside a function,
points down the layers, and memory and the sessions app never import each other.

    surfaces         api (REST /api/v1; api/openai/: /v1), backoffice (the Django admin and its read models),
                     mcp_server (/mcp), ops (health, metrics), config (the composition root): each may import
                     anything below it; side by side, only config imports the others, and mcp_server takes the REST
                     shapes from api
    assistant        assistant mode: the ReAct loop, its tools, a turn's run
    orchestration    flows that cross the packages: a message's and a turn's fan-out, import, erase, export
    context          buffer, anchors, bridges, links, composer
    memory | sessions   siblings: neither imports the other
    webhooks         per-tenant endpoints and signed deliveries: every layer above emits its events here
    tenants          tenancy: tenants, keys, end users, scoped managers
    infra            core adapters: errors, clock, tokens, Redis, LLM client, embedder, vector store

Below the surfaces no package holds a view, a URL route or an admin page: those live in api/ and backoffice/.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = {"assistant": 1, "orchestration": 2, "context": 3, "memory": 4, "sessions": 4, "webhooks": 5, "tenants": 6,
          "infra": 7}
# api: REST /api/v1 and the OpenAI-compatible /v1; backoffice: the Django admin; mcp_server: /mcp; ops: health and
# metrics; config: settings, URL conf, Celery app
SURFACE_PACKAGES = {"api", "backoffice", "config", "mcp_server", "ops"}
# Surfaces side by side: config composes them all; otherwise only these edges (the MCP tools answer in the REST shapes).
SURFACE_EDGES = {("mcp_server", "api")}
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
        if dst in SURFACE_PACKAGES and src != "config" and (src, dst) not in SURFACE_EDGES:
            return f"{src} and {dst} are surfaces side by side: neither imports the other"
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


def test_a_climbing_import_put_back_fails_the_scan():
    """No module is exempt by its file name or by sitting in a function: tenants/selectors.py reaching up to memory or
    to the REST surface is reported like any other climbing import."""
    path = ROOT / "tenants" / "selectors.py"
    assert layer_problems(path) == []
    climbed = path.read_text() + ("\n\ndef _memory_model():\n    from memory.models import MemoryRecord\n"
                                  "\n\ndef _user_shape():\n    from api.users import EndUserOutput\n")
    line = climbed[:climbed.index("from memory.models")].count("\n") + 1
    assert layer_problems(path, climbed) == [
        f"tenants/selectors.py:{line} imports memory.models: tenants (layer 6) may not import memory (layer 4): "
        "dependencies point down",
        f"tenants/selectors.py:{line + 4} imports api.users: api is a surface; only surfaces import it"]


def test_the_scan_sees_every_package_and_function_level_imports():
    files = list(project_files())
    assert {module_name(p).split(".")[0] for p in files} == PACKAGES
    inner = [i for p in files if module_name(p) == "memory.retrieval.query" for i in imports_of(p)
             if i[0] == "infra.llm"]
    assert inner, "function-level imports are part of the graph (memory.retrieval.query imports the LLM client lazily)"


# What makes a module a view, a route or an admin page. Below the surfaces none is allowed: DRF serializers, the
# exception handler, pagination, throttling and authentication are not views and stay where they are.
SURFACE_MODULE_NAMES = {"apis", "views", "urls", "admin"}
SURFACE_IMPORTS = {
    "rest_framework.views": {"APIView"},  # its exception_handler is infra's to wrap
    "rest_framework.generics": None,  # None: any name
    "rest_framework.viewsets": None,
    "rest_framework.routers": None,
    "rest_framework.decorators": None,
    "django.urls": {"path", "re_path", "include"},
    "django.conf.urls": None,
    "django.views": None,
    "django.contrib.admin": None,
}
SURFACE_SUBMODULES = {"rest_framework": {"views", "generics", "viewsets", "routers", "decorators"},
                      "django.contrib": {"admin"}, "django": {"urls", "views"}}
SURFACE_BASES = ("APIView", "ViewSet", "View", "ModelAdmin", "InlineModelAdmin", "TabularInline", "StackedInline",
                 "ListFilter", "SimpleListFilter")


def _surface_import(module: str, names: list[str]) -> bool:
    for prefix, allowed in SURFACE_IMPORTS.items():
        if module == prefix or module.startswith(prefix + "."):
            return allowed is None or bool(allowed & set(names)) or "*" in names
    return bool(SURFACE_SUBMODULES.get(module, set()) & set(names))


def surface_problems(path: Path, source: str | None = None) -> list[str]:
    """Every view, URL route or admin page the file (or `source`, read as that file) defines or imports the makings of,
    with the line."""
    where = path.relative_to(ROOT)
    problems = []
    parts = module_name(path).split(".")
    if SURFACE_MODULE_NAMES & set(parts[1:]):
        problems.append(f"{where}: a module named {'.'.join(parts[1:])} (views, routes and admin pages live in api/ "
                        "and backoffice/)")
    for node in ast.walk(ast.parse(path.read_text() if source is None else source, filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                module, _, name = alias.name.rpartition(".")
                if _surface_import(alias.name, []) or (module and _surface_import(module, [name])):
                    problems.append(f"{where}:{node.lineno} imports {alias.name}")
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [alias.name for alias in node.names]
            if _surface_import(node.module or "", names):
                problems.append(f"{where}:{node.lineno} imports {', '.join(names)} from {node.module}")
        elif isinstance(node, ast.ClassDef):
            bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases]
            if any(b.endswith(SURFACE_BASES) for b in bases):
                problems.append(f"{where}:{node.lineno} class {node.name}({', '.join(bases)}): a view or admin page")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "urlpatterns" for t in targets):
                problems.append(f"{where}:{node.lineno} defines urlpatterns")
    return problems


def test_no_package_below_the_surfaces_holds_a_view_a_route_or_an_admin_page():
    problems = [problem for path in project_files() if module_name(path).split(".")[0] in LAYERS
                for problem in surface_problems(path)]
    assert not problems, "views, routes or admin pages below the surfaces:\n" + "\n".join(problems)


def test_the_surfaces_hold_the_views_routes_and_admin_pages():
    """The scan knows a view, a route and an admin page when it sees one: each surface module below is full of them."""
    for module in ("api/memories.py", "api/urls.py", "api/openai/urls.py", "backoffice/admin/memory_logs.py",
                   "backoffice/admin/toolkit.py"):
        assert surface_problems(ROOT / module), module


@pytest.mark.parametrize("added", [
    "from rest_framework.views import APIView\n\n\nclass MemoryListApi(APIView):\n    pass\n",
    "from rest_framework import generics\n",
    "from rest_framework.decorators import api_view\n",
    "from django.urls import path\n\nurlpatterns = [path('x', print)]\n",
    "import django.contrib.admin\n",
    "from django.contrib import admin\n\n\n@admin.register(object)\nclass MemoryAdmin(admin.ModelAdmin):\n    pass\n",
    "from django.views.decorators.csrf import csrf_exempt\n",
])
def test_a_view_route_or_admin_page_put_back_below_the_surfaces_fails_the_scan(added):
    path = ROOT / "memory" / "selectors.py"
    assert surface_problems(path) == []
    assert surface_problems(path, path.read_text() + "\n" + added)


def test_a_view_module_put_back_below_the_surfaces_fails_the_scan():
    assert surface_problems(ROOT / "memory" / "apis" / "controls.py", "") == [
        "memory/apis/controls.py: a module named apis.controls (views, routes and admin pages live in api/ and "
        "backoffice/)"]
    assert surface_problems(ROOT / "tenants" / "admin.py", "")
    assert surface_problems(ROOT / "orchestration" / "urls.py", "")


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
    ("memory.extraction.pipeline", "context.buffer"),  # upwards
    ("context.composer", "orchestration.context"),
    ("tenants.services", "orchestration.erasure"),
    ("infra.health", "memory.models"),
    ("infra.checks", "config.celery"),
    ("orchestration.messages", "assistant.turns"),
    ("webhooks.events", "memory.models"),  # webhooks hear of changes; they never reach up for them
    ("webhooks.delivery", "sessions.models"),
    ("tenants.services", "webhooks.events"),
    ("ops.health", "config.celery"),
    # a surface is imported by surfaces only: a view, a serializer or an admin page never comes back down
    ("assistant.tools", "mcp_server.server"),
    ("assistant.turns", "api.turns"),
    ("assistant.chat_tasks", "api.openai.requests"),
    ("orchestration.forgetting", "api.memories"),
    ("memory.selectors", "api.search"),
    ("tenants.services", "backoffice.admin.toolkit"),
    ("orchestration.receipts", "backoffice.receipt_page"),
    ("sessions.selectors", "backoffice.transcript"),
    # surfaces side by side: neither imports the other (config composes them; mcp_server answers in api's shapes)
    ("api.users", "backoffice.admin.toolkit"),
    ("backoffice.playground", "api.openai.sessions"),
    ("api.memories", "mcp_server.server"),
    ("backoffice.admin.memories", "mcp_server.server"),
    ("api.urls", "config.urls"),
])
def test_an_import_against_the_direction_is_refused(importer, imported):
    assert violation(importer, imported)


@pytest.mark.parametrize("importer, imported", [
    ("orchestration.messages", "context.buffer"), ("context.buffer", "memory.selectors"),
    ("context.links", "sessions.models"), ("memory.actions", "tenants.selectors"), ("tenants.scoping", "django.db"),
    ("assistant.turns", "orchestration.context"), ("memory.actions", "webhooks.events"),
    ("context.bridge", "webhooks.events"), ("webhooks.events", "tenants.models"),
    # the surfaces call down into whichever package owns the work
    ("api.memories", "orchestration.forgetting"), ("api.memories", "memory.selectors"),
    ("api.users", "tenants.services"), ("api.turns", "assistant.turns"), ("api.openai.views", "assistant.turns"),
    ("api.openai.sessions", "sessions.models"),
    ("backoffice.admin.receipts", "orchestration.models"), ("backoffice.admin.sessions", "assistant.tools"),
    ("backoffice.playground_turn", "assistant.turns"), ("backoffice.transcript", "memory.overview"),
    ("mcp_server.server", "orchestration.context"), ("mcp_server.server", "api.search"),
    ("config.urls", "api.urls"), ("config.urls", "backoffice.playground"), ("config.asgi", "mcp_server.asgi"),
    ("config.urls", "ops.health"),
])
def test_an_import_along_the_direction_is_allowed(importer, imported):
    assert violation(importer, imported) is None
