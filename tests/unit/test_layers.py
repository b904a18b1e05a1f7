"""The layering of ARCHITECTURE.md holds: `lint-imports` keeps every contract of pyproject's [tool.importlinter],
and those contracts still say what the design says (a contract deleted or an exception added fails here).
No contract lets an import through: `ignore_imports` is empty everywhere."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
STAGES_TOP_FIRST = ["benchmarks", "study", "reports", "analysis", "loadgen", "decisions", "scenarios"]
# The scenario model the manifest embeds: a leaf of the ground (contracts ground and scenario-model).
SCENARIO_MODEL = {"scenarios.models", "scenarios.canary_models", "scenarios.cost_models", "scenarios.until_models"}


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
    assert packages == {"embedperf", "modelcore", "scenarios", "service", "collectors", *STAGES_TOP_FIRST}

    assert contracts["stages"]["type"] == "layers"
    assert contracts["stages"]["layers"] == STAGES_TOP_FIRST

    scenario_code = {f"scenarios.{p.stem}" for p in (REPO_ROOT / "scenarios").glob("*.py")} - {"scenarios.__init__"}
    ground = contracts["ground"]
    assert (ground["type"], ground["source_modules"]) == ("forbidden", ["embedperf"])
    assert set(ground["forbidden_modules"]) == packages - {"embedperf", "scenarios"} | scenario_code - SCENARIO_MODEL
    model = contracts["scenario-model"]
    assert set(model["source_modules"]) == SCENARIO_MODEL
    assert set(model["forbidden_modules"]) >= packages - {"scenarios"} | scenario_code - SCENARIO_MODEL

    load_side = {"scenarios", "decisions", "loadgen", "analysis", "reports", "study", "benchmarks"}
    service = contracts["service"]
    assert (service["type"], service["source_modules"]) == ("forbidden", ["service"])
    assert set(service["forbidden_modules"]) == load_side | {"collectors"}
    collectors = contracts["collectors"]
    assert (collectors["type"], collectors["source_modules"]) == ("forbidden", ["collectors"])
    assert set(collectors["forbidden_modules"]) == load_side - {"scenarios"} | scenario_code - SCENARIO_MODEL | {
        "service",
        "modelcore",
    }
    direct = contracts["collectors-direct"]
    assert (direct["source_modules"], direct["forbidden_modules"]) == (["collectors"], ["scenarios"])

    for package, layers in (
        ("loadgen", ["cli", "wiring", "shaping | distributed", "lifecycle", "recording | processes", "traffic"]),
        ("analysis", ["cli", "compare", "run", "engine", "figures", "model"]),
    ):
        inner = contracts[f"{package}-layers"]
        assert (inner["type"], inner["containers"], inner["layers"]) == ("layers", [package], layers)
        assert not inner.get("ignore_imports"), f"{package}-layers lets imports through"

    over_http = contracts["service-over-http"]
    assert (over_http["type"], over_http["forbidden_modules"]) == ("forbidden", ["service"])
    assert set(over_http["source_modules"]) == load_side

    # the model code: shared by the service's engine, study and the benchmarks; it imports only the ground
    modelcore = contracts["modelcore"]
    assert (modelcore["type"], modelcore["source_modules"]) == ("forbidden", ["modelcore"])
    assert set(modelcore["forbidden_modules"]) == packages - {"modelcore", "embedperf"}
    users = contracts["model-users"]
    assert (users["type"], users["forbidden_modules"]) == ("forbidden", ["modelcore"])
    assert set(users["source_modules"]) == load_side - {"study", "benchmarks"}

    acyclic = contracts["acyclic"]
    assert acyclic["type"] == "acyclic_siblings" and set(acyclic["ancestors"]) == packages


def test_no_contract_lets_an_import_through() -> None:
    ignored = {cid: c["ignore_imports"] for cid, c in _contracts().items() if c.get("ignore_imports")}
    assert ignored == {}


def test_no_product_module_or_benchmark_imports_test_code() -> None:
    """tests/ is outside the contracts (grimp does not see it), so this check reads the imports itself."""
    offences = []
    for package in _config()["root_packages"]:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = (
                    [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else []
                )
                offences += [f"{path.relative_to(REPO_ROOT)}: {n}" for n in names if n.split(".")[0] == "tests"]
    assert offences == []


def test_architecture_pictures_the_stage_order_of_the_contracts() -> None:
    """ARCHITECTURE.md's picture of the packages starts with the stage order, top first, down to the ground."""
    text = (REPO_ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    chains = [line.split() for line in text.splitlines() if line.startswith(f"{STAGES_TOP_FIRST[0]} ─►")]
    assert chains, "ARCHITECTURE.md has no line picturing the stage order"
    assert [word for word in chains[0] if word != "─►"][: len(STAGES_TOP_FIRST) + 1] == [
        *_contracts()["stages"]["layers"],
        "embedperf",
    ]
