"""Inside memory, the extraction package computes and memory.actions writes: actions may call extraction (the remember
tool extracts and verifies statements before writing them), extraction never reaches up to the writers. Whatever
persists an extraction's decisions lives in memory.actions."""
from __future__ import annotations

from pathlib import Path

from .test_layers import ROOT, imports_of, module_name

LOWER, UPPER = "memory.extraction", "memory.actions"


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def extraction_climbs(path: Path, source: str | None = None) -> list[str]:
    """Every import of memory.actions in an extraction module (or in `source`, read as that file), with its line."""
    return [f"{path.relative_to(ROOT)}:{line} imports {imported}" for imported, line in imports_of(path, source)
            if _within(imported, UPPER)]


def extraction_files() -> list[Path]:
    return sorted((ROOT / "memory" / "extraction").rglob("*.py"))


def test_memory_extraction_never_imports_memory_actions():
    assert extraction_files(), "the scan must see the extraction package"
    problems = [problem for path in extraction_files() for problem in extraction_climbs(path)]
    assert not problems, "memory.extraction computes, memory.actions writes; these imports point up:\n" + \
        "\n".join(problems)


def test_an_extraction_import_of_the_writers_put_back_fails_the_scan():
    path = ROOT / "memory" / "extraction" / "verify.py"
    assert module_name(path) == "memory.extraction.verify"
    climbed = path.read_text() + "\n\ndef _write():\n    from ..actions import decisions_apply\n"
    line = climbed[:climbed.index("from ..actions")].count("\n") + 1
    assert extraction_climbs(path, climbed) == [f"memory/extraction/verify.py:{line} imports memory.actions"]
