"""The layering of DESIGN.md holds: `lint-imports` keeps every contract of pyproject's [tool.importlinter],
and those contracts still say what the design says (a contract deleted or an exception added fails here)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
STAGES_TOP_FIRST = ["study", "reports", "analysis", "loadgen", "scenarios"]
# Every import a contract lets through, by contract id; each is justified beside it in pyproject.toml.
REVIEWED_EXCEPTIONS = {
    "ground": {"embedperf.schema.manifest -> scenarios.models", "embedperf.schema.upgrade -> scenarios.models"},
    "stages": {
        "loadgen.shaping.search -> analysis.search.state",
        "loadgen.shaping.probe_window -> analysis.search.state",
        "loadgen.recording.until_watch -> analysis.search.stats",
    },
    "collectors": {"embedperf.schema.manifest -> scenarios.models", "embedperf.schema.upgrade -> scenarios.models"},
}


def _config() -> dict[str, Any]:
    with (REPO_ROOT / "pyproject.toml").open("rb") as fh:
        config: dict[str, Any] = tomllib.load(fh)["tool"]["importlinter"]
    return config


def _contracts() -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in _config()["contracts"]}


def test_lint_imports_keeps_every_contract() -> None:
    assert LINT_IMPORTS.is_file(), f"{LINT_IMPORTS} missing: install the dev extra (make setup)"
    proc = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, f"lint-imports found a broken contract:\n{proc.stdout}\n{proc.stderr}"
    assert f"Contracts: {len(_contracts())} kept, 0 broken." in proc.stdout, proc.stdout


def test_the_contracts_declare_the_design() -> None:
    contracts = _contracts()
    packages = set(_config()["root_packages"])
    assert packages == {"embedperf", "scenarios", "service", "collectors", *STAGES_TOP_FIRST}

    assert contracts["stages"]["type"] == "layers"
    assert contracts["stages"]["layers"] == STAGES_TOP_FIRST

    ground = contracts["ground"]
    assert (ground["type"], ground["source_modules"]) == ("forbidden", ["embedperf"])
    assert set(ground["forbidden_modules"]) == packages - {"embedperf"}

    load_side = {"scenarios", "loadgen", "analysis", "reports", "study"}
    for name, other in (("service", "collectors"), ("collectors", "service")):
        contract = contracts[name]
        assert (contract["type"], contract["source_modules"]) == ("forbidden", [name])
        assert set(contract["forbidden_modules"]) == load_side | {other}, name

    for package, layers in (
        ("loadgen", ["cli", "wiring", "shaping | distributed", "lifecycle", "recording | processes", "traffic"]),
        ("analysis", ["cli", "compare", "run", "engine | search", "figures", "model"]),
    ):
        inner = contracts[f"{package}-layers"]
        assert (inner["type"], inner["containers"], inner["layers"]) == ("layers", [package], layers)
        assert not inner.get("ignore_imports"), f"{package}-layers lets imports through"

    over_http = contracts["service-over-http"]
    assert (over_http["type"], over_http["forbidden_modules"]) == ("forbidden", ["service"])
    assert set(over_http["source_modules"]) == load_side - {"study"}  # study measures service.model itself

    acyclic = contracts["acyclic"]
    assert acyclic["type"] == "acyclic_siblings" and set(acyclic["ancestors"]) == packages


def test_only_the_reviewed_imports_are_exceptions() -> None:
    ignored = {
        cid: set(c["ignore_imports"]) for cid, c in _contracts().items() if c.get("ignore_imports")
    }
    assert ignored == REVIEWED_EXCEPTIONS
