"""Run the optimisation matrix: each configuration in a fresh service process, the same scenario each time.

The order rotates every repeat so that drift on a noisy machine spreads over all configurations instead of
masquerading as an effect of one of them.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from decisions.search.state import devices_serving, headline, read_search
from embedperf.errors import EmbedperfError
from embedperf.files import write_atomically
from embedperf.schema import RunFolder, make_run_id, read_manifest
from loadgen.cli.runner import run_scenario
from loadgen.processes.redis_proc import RedisServer
from loadgen.processes.service_proc import ServiceProcess
from modelcore.model_folder import model_dir
from scenarios.loader import load_scenario
from study.corpus import shipped_eval_set
from study.matrix.spec import Configuration, MatrixSpec, service_args
from study.precision.compare import compare_embeddings
from study.precision.gate import PrecisionGates
from study.reference_vectors import fp32_reference_vectors

MATRIX_FILE = "matrix.json"
REFERENCE_PRECISION = "fp32"


class MatrixRun(BaseModel):
    config: str
    repeat: int
    order: int
    run_dir: str | None
    ok: bool
    error: str = ""
    service_args: list[str] = []
    wall_s: float = 0.0


class MatrixRecord(BaseModel):
    """matrix.json: what was asked and what happened, enough to rebuild the matrix report."""

    spec: dict[str, Any]
    repeat: int
    started_unix_s: float
    finished_unix_s: float | None = None
    runs: list[MatrixRun] = []
    precision: dict[str, dict[str, Any]] = {}

    def write(self, folder: Path) -> None:
        write_atomically(folder / MATRIX_FILE, self.model_dump_json(indent=2))

    @classmethod
    def read(cls, folder: Path) -> MatrixRecord:
        return cls.model_validate_json((folder / MATRIX_FILE).read_text(encoding="utf-8"))


def run_order(configs: list[Configuration], repeat: int) -> list[tuple[int, Configuration]]:
    """(repeat index, configuration) in execution order: rotated by one configuration per round."""
    return [(r, configs[(r + i) % len(configs)]) for r in range(repeat) for i in range(len(configs))]


def precision_of(settings: dict[str, Any]) -> str:
    return str(settings.get("precision", REFERENCE_PRECISION))


def changes_numerics(settings: dict[str, Any]) -> bool:
    """A configuration whose embeddings may differ from the fp32 reference: it needs a precision check."""
    return precision_of(settings) != REFERENCE_PRECISION or "model" in settings


def check_precisions(spec: MatrixSpec, log: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """Precision figures for every configuration that changes numerics (fp16, bf16, int8)."""
    # torch (modelcore.model) loads only when a configuration changes numerics
    from modelcore.model import load_model

    corpus = shipped_eval_set()
    texts = [t.text for t in corpus.texts]
    results: dict[str, dict[str, Any]] = {}
    reference = None
    for config in spec.configurations:
        settings = spec.service_settings(config)
        precision = precision_of(settings)
        if not changes_numerics(settings):
            continue
        if reference is None:
            reference = fp32_reference_vectors(
                model_dir(None), texts, lambda: load_model(None, device="cpu", precision="fp32").encode(texts)
            )
        model_path = Path(str(settings["model"])) if "model" in settings else None
        device = str(settings.get("device", "cpu"))
        log(f"precision: {config.name} ({precision} on {device})")
        candidate = load_model(
            model_path, device=device, precision=precision, int8_exclude=str(settings.get("int8_exclude", ""))
        ).encode(texts)
        result = compare_embeddings(
            reference,
            candidate,
            corpus.texts,
            candidate_name=f"{config.name} ({precision})",
            gates=PrecisionGates.for_profile(spec.precision_profile),
            label_fields=corpus.label_fields,
        )
        results[config.name] = result.model_dump()
    return results


def search_timeout_s(spec: MatrixSpec, overrides: dict[str, str]) -> float | None:
    """A search run's time bound (None for steps); resolving the scenario refuses a closed-loop one early."""
    if spec.measure != "search":
        return None
    from study.bench.search import RUN_MARGIN_S  # it brings the report builder (matplotlib): search runs only

    scenario = load_scenario(spec.scenario, profile=spec.profile, overrides=overrides)
    return scenario.search.max_duration_s + RUN_MARGIN_S


def searched_answer(run_folder: RunFolder) -> str:
    """The search's one-line answer, for the matrix log."""
    record = read_search(manifest := read_manifest(run_folder))
    return headline(record, devices_serving(manifest)) if record is not None else "no search record"


def run_matrix(
    spec: MatrixSpec,
    runs_dir: Path,
    repeat: int = 1,
    check_precision: bool = True,
    log: Callable[[str], None] = print,
) -> Path:
    search_timeout_s(spec, {**spec.search_overrides(), **spec.scenario_overrides})  # fails before any run
    folder = (runs_dir / make_run_id("matrix", Path(spec.scenario).stem)).resolve()
    folder.mkdir(parents=True, exist_ok=False)
    (folder / "logs").mkdir()
    record = MatrixRecord(spec=spec.model_dump(), repeat=repeat, started_unix_s=time.time())
    record.write(folder)
    if check_precision:
        record.precision = check_precisions(spec, log)
        record.write(folder)
    plan = run_order(spec.configurations, repeat)
    for order, (r, config) in enumerate(plan):
        args = service_args(spec.service_settings(config))
        overrides = {**spec.search_overrides(), **spec.scenario_overrides, **config.scenario_overrides}
        for key, value in (("slo.p99_ms", spec.slo_p99_ms), ("slo.error_budget_pct", spec.error_budget_pct)):
            if value is not None:
                overrides.setdefault(key, str(value))
        log(f"[{order + 1}/{len(plan)}] {config.name} (repeat {r + 1}): embedperf serve {' '.join(args)}")
        started, name = time.monotonic(), f"{config.name}-r{r}"  # the run's label, its logs' and cache's name
        run = MatrixRun(config=config.name, repeat=r, order=order, run_dir=None, ok=False, service_args=args)
        try:
            with contextlib.ExitStack() as stack:
                # A private cache per run: no entry survives from one configuration to the next.
                if config.redis:
                    redis = stack.enter_context(RedisServer(folder / "redis" / name))
                    args = [*args, "--cache", redis.url]
                    run.service_args = args
                    log(f"  shared cache: a private redis-server at {redis.url}")
                service = stack.enter_context(
                    ServiceProcess(args, log_path=folder / "logs" / f"service-{name}.log")
                )
                locust_log = stack.enter_context(
                    open(folder / "logs" / f"locust-{name}.log", "w", encoding="utf-8")
                )
                run_folder = run_scenario(
                    spec.scenario,
                    service.url,
                    runs_dir=folder / "runs",
                    label=name,
                    profile=spec.profile,
                    overrides=overrides,
                    echo=locust_log,
                    timeout_s=search_timeout_s(spec, overrides),
                )
            if spec.measure == "search":
                log(f"  searched: {searched_answer(run_folder)}")
            run.run_dir = str(run_folder.root.relative_to(folder))
            run.ok = True
            if (precision := record.precision.get(config.name)) is not None:
                run_folder.precision.write_text(json.dumps(precision, indent=2), encoding="utf-8")
        except EmbedperfError as exc:
            run.error = str(exc)
            log(f"  failed: {exc}")
        run.wall_s = round(time.monotonic() - started, 1)
        record.runs.append(run)
        record.write(folder)
    record.finished_unix_s = time.time()
    record.write(folder)
    return folder
