"""No load-run state in loadgen's module globals: a run's state lives on Locust's Environment
(loadgen.lifecycle.run_state), so every module of loadgen/ is read for the ways a global gets rebound."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
LOADGEN = REPO_ROOT / "loadgen"
# A module-level name bound to one of these is a slot waiting to be filled or a store that grows: state.
EMPTY_CALLS = {
    "dict",
    "list",
    "set",
    "count",
    "deque",
    "defaultdict",
    "WeakKeyDictionary",
    "WeakValueDictionary",
}


def _modules() -> list[Path]:
    return sorted(LOADGEN.rglob("*.py"))


def _module_level_bindings(tree: ast.Module) -> list[tuple[str, ast.expr | None, int]]:
    """(name, value, line) of every assignment at module level, those under `if`/`try` included."""
    out: list[tuple[str, ast.expr | None, int]] = []
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.Assign):
            out += [(t.id, node.value, node.lineno) for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            out.append((node.target.id, node.value, node.lineno))
        elif isinstance(node, ast.If | ast.Try | ast.With):
            todo += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            for handler in getattr(node, "handlers", []):
                todo += handler.body
    return out


def _is_state(value: ast.expr | None) -> bool:
    if value is None or (isinstance(value, ast.Constant) and value.value is None):
        return True  # a name declared now and given its value later, by someone else
    if isinstance(value, ast.List | ast.Set) and not value.elts:
        return True  # an empty container at module level fills up while the process runs
    if isinstance(value, ast.Dict) and not value.keys:
        return True
    if isinstance(value, ast.Call) and not value.args and not value.keywords:
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        return name in EMPTY_CALLS
    return False


def _imported_modules(tree: ast.Module) -> set[str]:
    """Local names that stand for one of the project's modules (`import loadgen.x as y`, `from
    loadgen.traffic import context`): found on disk, so nothing is imported (Locust least of all)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name.split(".")[0] for a in node.names if _is_project_module(a.name)}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if _is_project_module(f"{node.module}.{alias.name}"):
                    names.add(alias.asname or alias.name)
    return names


def _is_project_module(dotted: str) -> bool:
    path = REPO_ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def state_findings(source: str, where: str) -> list[str]:
    """Every way a module's source keeps state in a module global; empty when it keeps none."""
    tree = ast.parse(source, filename=where)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.append(f"{where}:{node.lineno}: `global {', '.join(node.names)}` rebinds a module global")
    bound: dict[str, int] = {}
    for name, value, line in _module_level_bindings(tree):
        if name in bound and name != "__all__":
            found.append(f"{where}:{line}: module-level `{name}` bound again (first at line {bound[name]})")
        bound.setdefault(name, line)
        if _is_state(value):
            found.append(f"{where}:{line}: module-level `{name}` starts empty: a slot for run state")
    modules = _imported_modules(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        else:
            continue
        for target in targets:
            if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)):
                continue
            if target.value.id in modules:
                found.append(
                    f"{where}:{node.lineno}: `{target.value.id}.{target.attr} = ...` sets a module's global"
                )
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(LOADGEN)))
def test_no_module_of_loadgen_keeps_run_state(path: Path) -> None:
    assert state_findings(path.read_text(encoding="utf-8"), str(path.relative_to(REPO_ROOT))) == []


@pytest.mark.parametrize(
    "source",
    [
        "_current = None\n",
        "_active: object | None = None\n",
        "_seen: dict[str, int] = {}\n",
        "import itertools\n_user_seq = itertools.count()\n",
        "def f():\n    global _x\n    _x = 1\n",
        "_installed = False\n_installed = True\n",
        "from loadgen.traffic import context\ncontext.anything = 1\n",
        "import loadgen.traffic.context as ctx\nctx.anything = 1\n",
    ],
)
def test_each_way_to_keep_module_state_is_found(source: str) -> None:
    assert state_findings(source, "probe.py"), source


def test_constants_are_not_state() -> None:
    source = (
        "import re\nfrom typing import Any\nLIMIT_S = 3.0\n_PATTERN = re.compile('x')\n"
        "_NO_TIMING: list[Any] = [None] * 4\nNAMES = ('a', 'b')\nTABLE = {'a': 1}\n__all__ = ['X']\n"
    )
    assert state_findings(source, "probe.py") == []


def test_only_the_run_state_is_kept_on_locusts_environment() -> None:
    """Everything of a run hangs off the one RunState (environment.embedperf): no other module sets an
    attribute of its own on Locust's Environment."""
    setters = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
                target = ast.unparse(node.args[0])
                if "env" in target:  # environment, self.environment, self.runner.environment, env
                    setters.append(f"{path.relative_to(REPO_ROOT)}: {target}")
    assert setters == ["loadgen/lifecycle/run_state.py: environment"]
