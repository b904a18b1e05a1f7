"""Every module a product docstring names exists: a path (`analysis/engine/views.py`, `tests/oracles/...`)
is a file or folder of the repository, a dotted name (`loadgen.traffic.headers.parse_raw_timing`) is a
module, or a name defined in one. A module that moves leaves no docstring pointing at its old place."""

from __future__ import annotations

import ast
import re
import tomllib
from functools import cache
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
FILE_SUFFIXES = {"py", "yaml", "json", "html", "md", "toml", "j2", "txt", "csv"}


def product_packages() -> list[str]:
    with (REPO_ROOT / "pyproject.toml").open("rb") as fh:
        packages: list[str] = tomllib.load(fh)["tool"]["importlinter"]["root_packages"]
    return packages


PACKAGES = product_packages()
TOPS = sorted({*PACKAGES, "tests", "locustfiles", "deploy"})
PATH_RE = re.compile(r"(?<![\w./-])((?:" + "|".join(TOPS) + r")/[\w/.-]*\w)")
DOTTED_RE = re.compile(r"(?<![\w./])((?:" + "|".join(PACKAGES) + r")(?:\.\w+)+)")


def module_file(name: str) -> Path | None:
    path = REPO_ROOT.joinpath(*name.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


@cache
def defined_names(path: Path) -> frozenset[str]:
    """Names a module defines or imports, and the attributes its classes set on self."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            names.add(node.attr)
    return frozenset(names)


def missing_references(text: str) -> list[str]:
    missing = [
        ref
        for ref in (m.group(1).rstrip(".") for m in PATH_RE.finditer(text))
        if not any(ch in ref for ch in "*<{") and not (REPO_ROOT / ref).exists()
    ]
    for match in DOTTED_RE.finditer(text):
        parts = match.group(1).rstrip(".").split(".")
        if parts[-1] in FILE_SUFFIXES:  # a file name spelt with dots, checked as a path above
            continue
        for i in range(len(parts), 0, -1):
            found = module_file(".".join(parts[:i]))
            if found is not None:
                break
        rest = parts[i:]
        if found is None or (rest and rest[0] not in defined_names(found)):
            missing.append(".".join(parts))
    return missing


def docstring_references() -> list[str]:
    out: list[str] = []
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                    doc = ast.get_docstring(node)
                    if doc:
                        out += [f"{path.relative_to(REPO_ROOT)}: {ref}" for ref in missing_references(doc)]
    return out


def test_the_check_tells_a_moved_module_from_one_that_exists() -> None:
    text = (
        "see analysis/engine/views.py and loadgen.traffic.headers.parse_raw_timing; "
        "not analysis/search/state.py, analysis.order_stats nor loadgen.traffic.headers.no_such_name"
    )
    assert missing_references(text) == [
        "analysis/search/state.py",
        "analysis.order_stats",
        "loadgen.traffic.headers.no_such_name",
    ]


def test_every_module_a_product_docstring_names_exists() -> None:
    assert docstring_references() == []
