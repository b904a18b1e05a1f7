"""Golden tests: every npu-smi sample under tests/fixtures parses to exactly the stored result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import npu_golden_lib as golden  # noqa: E402

FIXTURES = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "npu-smi").glob("*.txt"))


def test_every_fixture_has_a_golden_file(npu_smi_fixtures: Path) -> None:
    names = {p.stem for p in npu_smi_fixtures.glob("*.txt")}
    assert names, "no npu-smi fixtures found"
    assert names == {p.stem for p in golden.GOLDEN_DIR.glob("*.json")}


@pytest.mark.parametrize("fixture", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture_parses_to_golden(fixture: Path) -> None:
    expected = json.loads((golden.GOLDEN_DIR / f"{fixture.stem}.json").read_text(encoding="utf-8"))
    assert golden.load_fixture(fixture) == expected
