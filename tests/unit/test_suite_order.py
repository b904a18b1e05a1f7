"""The order `make test` hands modules to its workers: the longest modules named in tests/conftest.py exist
(a renamed one would silently fall back to its tier), and they start before every other module."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import LONGEST_MODULES, TESTS_DIR, start_order

REPO_ROOT = TESTS_DIR.parent


def test_every_longest_module_exists() -> None:
    missing = [m for m in LONGEST_MODULES if not (TESTS_DIR / m).is_file()]
    assert not missing, f"tests/conftest.py LONGEST_MODULES names modules that do not exist: {missing}"


def test_make_test_hands_out_whole_modules_in_the_conftest_order() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^test:.*\n\t(.+)$", makefile, re.M)
    assert recipe is not None
    command = recipe.group(1).split()
    assert "--dist" in command and command[command.index("--dist") + 1] == "loadscope", recipe.group(1)
    assert "--no-loadscope-reorder" in command, "xdist would reorder modules by test count otherwise"


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
