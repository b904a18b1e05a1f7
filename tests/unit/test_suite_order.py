"""The order `make test` hands modules to its workers: the longest modules named in tests/conftest.py exist
(a renamed one would silently fall back to its tier), and they start before every other module. The tiers
that skip importing modules (make test-quick, the solo phase) still see every module marked for them."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

from tests.conftest import LONGEST_MODULES, TESTS_DIR, start_order

REPO_ROOT = TESTS_DIR.parent


def test_every_longest_module_exists() -> None:
    missing = [m for m in LONGEST_MODULES if not (TESTS_DIR / m).is_file()]
    assert not missing, f"tests/conftest.py LONGEST_MODULES names modules that do not exist: {missing}"


def _make_test_pytest_runs() -> list[list[str]]:
    """The pytest command lines of the Makefile's `test` recipe, in order."""
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe is not None, "the Makefile has no test target"
    runs = [shlex.split(line.split("||")[0]) for line in recipe.group(1).splitlines() if " -m pytest " in line]
    return [run[run.index("pytest") :] for run in runs]


def test_make_test_hands_out_whole_modules_in_the_conftest_order() -> None:
    parallel = _make_test_pytest_runs()[0]
    assert "--dist" in parallel and parallel[parallel.index("--dist") + 1] == "loadscope", parallel
    assert "--no-loadscope-reorder" in parallel, "xdist would reorder modules by test count otherwise"


def test_make_test_runs_the_solo_tests_after_the_others_one_at_a_time() -> None:
    runs = _make_test_pytest_runs()
    assert len(runs) == 2, runs
    parallel, solo = runs
    assert parallel[parallel.index("-m") + 1] == "not solo", parallel
    assert solo[solo.index("-m") + 1] == "solo" and "-n" not in solo, solo
    assert parallel[-1] == solo[-1] == "tests"  # together they cover the whole suite


def test_the_longest_modules_are_collected_first() -> None:
    class Item:  # the one attribute start_order reads besides the markers
        def __init__(self, path: Path) -> None:
            self.path = path

        def get_closest_marker(self, name: str) -> None:
            return None

    longest = [start_order(Item(TESTS_DIR / m)) for m in LONGEST_MODULES]  # type: ignore[arg-type]
    assert longest == sorted(longest) == list(range(len(LONGEST_MODULES)))
    other_e2e = start_order(Item(TESTS_DIR / "e2e" / "test_bench_e2e.py"))  # type: ignore[arg-type]
    unit = start_order(Item(TESTS_DIR / "unit" / "test_layers.py"))  # type: ignore[arg-type]
    assert max(longest) < other_e2e < unit


def _modules_marking(marker: str) -> dict[Path, bool]:
    """Every test module that applies `marker` through a `.marker` attribute (pytest.mark.X, mark.X), and
    whether its text spells it `pytest.mark.X`, which is what tests/conftest.py's pytest_ignore_collect looks
    for before importing a module."""
    found = {}
    for path in TESTS_DIR.rglob("test_*.py"):
        text = path.read_text(encoding="utf-8")
        if any(isinstance(n, ast.Attribute) and n.attr == marker for n in ast.walk(ast.parse(text))):
            found[path] = f"pytest.mark.{marker}" in text
    return found


def test_the_tiers_that_skip_modules_unread_see_every_marked_module() -> None:
    """make test-quick and the solo phase skip importing modules without `pytest.mark.quick` / `.solo` in
    their text; a module that marks its tests another way would silently drop out of that tier."""
    for marker in ("quick", "solo"):
        marking = _modules_marking(marker)
        assert marking, f"no test module is marked {marker}"
        unseen = sorted(str(p.relative_to(TESTS_DIR)) for p, spelled in marking.items() if not spelled)
        assert not unseen, f"spell the marker pytest.mark.{marker} in {unseen}"
