"""No product module reaches another product package through `importlib.import_module` or `__import__`
with a constant name: such an import is invisible to lint-imports, so it would be a back door through
the layer contracts. A package's own modules and third-party modules (torch_npu, pynvml) may be loaded
so; the CLI's command table names its modules in a dict, which the reachability test reads."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DYNAMIC_IMPORTERS = {"import_module", "__import__"}


def product_packages() -> list[str]:
    with (REPO_ROOT / "pyproject.toml").open("rb") as fh:
        packages: list[str] = tomllib.load(fh)["tool"]["importlinter"]["root_packages"]
    return packages


def dynamic_imports(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """(line, module name) of every import_module/__import__ call whose first argument is a string constant."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        first = node.args[0]
        if name in DYNAMIC_IMPORTERS and isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.append((node.lineno, first.value))
    return found


def cross_package(packages: list[str]) -> list[str]:
    offences: list[str] = []
    for package in packages:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            for line, name in dynamic_imports(path.read_text(encoding="utf-8"), str(path)):
                top = name.split(".")[0]
                if top in packages and top != package:
                    offences.append(f"{path.relative_to(REPO_ROOT)}:{line} imports {name!r} dynamically")
    return offences


def test_the_check_sees_every_spelling() -> None:
    source = (
        "import importlib\nfrom importlib import import_module\n"
        "importlib.import_module('reports.build')\nimport_module('analysis.run')\n"
        "__import__('study.bench.cli')\nimportlib.import_module(name)\n"
    )
    assert dynamic_imports(source) == [(3, "reports.build"), (4, "analysis.run"), (5, "study.bench.cli")]


def test_no_product_module_imports_another_package_dynamically() -> None:
    packages = product_packages()
    assert {"loadgen", "reports", "analysis", "study"} <= set(packages)
    assert cross_package(packages) == [], "import it statically (lint-imports then checks it) or pass a hook"
