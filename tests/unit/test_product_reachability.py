"""Every product module is used by the product: reachable by imports from a way the product is started.

The starts are the console scripts and entry points of pyproject.toml, the modules a Makefile target
runs with `-m`, every `__main__`, the modules named by a string constant in product code (the CLI's
command table, `[sys.executable, "-m", "service"]`) and what the locustfiles import. A module that only
tests reach (an in-memory twin of a figure, a stub) belongs under tests/.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path

import grimp

REPO_ROOT = Path(__file__).resolve().parents[2]


def product_packages() -> list[str]:
    with (REPO_ROOT / "pyproject.toml").open("rb") as fh:
        packages: list[str] = tomllib.load(fh)["tool"]["importlinter"]["root_packages"]
    return packages


def string_constants(files: Iterable[Path]) -> set[str]:
    found: set[str] = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return found


def imported_names(files: Iterable[Path]) -> set[str]:
    found: set[str] = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
    return found


def starts(graph: grimp.ImportGraph, packages: list[str]) -> set[str]:
    modules = set(graph.modules)
    code = [p for package in packages for p in (REPO_ROOT / package).rglob("*.py")]
    named = string_constants(code)
    build_files = (REPO_ROOT / "Makefile").read_text(encoding="utf-8") + (
        REPO_ROOT / "pyproject.toml"
    ).read_text(encoding="utf-8")
    in_build = {m for m in modules if re.search(rf"(?<![\w.]){re.escape(m)}(?![\w.])", build_files)}
    locust = imported_names((REPO_ROOT / "locustfiles").rglob("*.py"))
    mains = {m for m in modules if m.endswith(".__main__")}
    return (named | in_build | locust | mains) & modules


def unreachable(graph: grimp.ImportGraph, roots: set[str]) -> set[str]:
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        module = stack.pop()
        if module in seen:
            continue
        seen.add(module)
        stack.extend(graph.find_modules_directly_imported_by(module))
        parts = module.split(".")
        stack.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # a submodule imports its packages
    return set(graph.modules) - seen


def test_every_product_module_is_reached_from_a_product_start() -> None:
    packages = product_packages()
    graph = grimp.build_graph(*packages, include_external_packages=False, cache_dir=None)
    roots = starts(graph, packages)
    assert {"embedperf.cli", "service.__main__"} <= roots  # the console script and `python -m service`
    assert unreachable(graph, roots) == set(), "product modules no product start reaches: move them to tests/"


def test_a_module_only_tests_import_is_found() -> None:
    """The check itself: a module no start reaches is reported, and one a start imports is not."""
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.cli", "pkg.used", "pkg.twin"):
        graph.add_module(module)
    graph.add_import(importer="pkg.cli", imported="pkg.used")
    assert unreachable(graph, {"pkg.cli"}) == {"pkg.twin"}
