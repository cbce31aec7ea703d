"""Each model is written by its owner's services (DESIGN.md): messages and sessions by sessions/, anchors, bridges and
links by context/, memories and their events and outbox rows by memory/, receipts and import jobs by orchestration/.
Anything else asks the owner. A write through a model's manager (create, bulk_create, get_or_create,
update_or_create, and update or delete on a queryset) anywhere else fails the scan."""
from __future__ import annotations

import ast
from pathlib import Path

from .test_layers import PACKAGES, ROOT

OWNERS = {"Session": "sessions", "Message": "sessions",
          "SummaryAnchor": "context", "BridgeSummary": "context", "SessionLink": "context",
          "MemoryRecord": "memory", "MemoryEvent": "memory", "VectorOutbox": "memory",
          "ContextReceipt": "orchestration", "ContextReceiptItem": "orchestration", "ImportJob": "orchestration"}
WRITES = {"create", "bulk_create", "get_or_create", "update_or_create", "update", "delete", "bulk_update"}


def _model_of(node: ast.AST) -> str | None:
    """The model whose manager a call chain starts from (`Message.objects.filter(...).update` -> "Message")."""
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            if node.attr == "objects" and isinstance(node.value, ast.Name):
                return node.value.id
            node = node.value
        else:
            return None


def foreign_writes(path: Path, source: str | None = None) -> list[str]:
    """Each manager write in the file to a model its package does not own, with its line."""
    package = path.relative_to(ROOT).parts[0]
    tree = ast.parse(path.read_text() if source is None else source)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITES:
            model = _model_of(node.func.value)
            if model in OWNERS and OWNERS[model] != package:
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} {model}.{node.func.attr}")
    return out


def code_files() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts)


def test_every_model_is_written_only_by_its_owner():
    files = code_files()
    assert any(p.parts[-2:] == ("sessions", "services.py") for p in files), "the scan must see the owners' services"
    problems = [problem for path in files for problem in foreign_writes(path)]
    assert not problems, "write through the owner's services instead:\n" + "\n".join(problems)


def test_a_foreign_write_put_back_fails_the_scan():
    path = ROOT / "orchestration" / "messages.py"
    source = path.read_text() + (
        "\n\ndef _rewrite(message_id, text):\n"
        "    Message.objects.filter(pk=message_id).update(content=text)\n"
        "    BridgeSummary.objects.create(text=text)\n")
    lines = source.count("\n")
    assert foreign_writes(path, source) == [f"orchestration/messages.py:{lines - 1} Message.update",
                                            f"orchestration/messages.py:{lines} BridgeSummary.create"]


def test_the_owner_writing_its_own_model_passes():
    path = ROOT / "sessions" / "services.py"
    source = path.read_text() + "\n\ndef _touch(pk):\n    Message.objects.filter(pk=pk).update(token_count=0)\n"
    assert foreign_writes(path, source) == []
