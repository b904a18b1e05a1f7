"""The run folder on disk: its id and paths, finding the newest, and reading and writing its manifest and tables."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from embedperf.errors import RunFolderError
from embedperf.files import write_atomically
from embedperf.schema.manifest import Manifest
from embedperf.schema.tables import REQUEST_SCHEMA, SCHEMA_VERSION, TELEMETRY_SCHEMA, read_parts

# Paths
RUN_ID_RE = re.compile(r"^\d{8}T\d{6}Z-[A-Za-z0-9_.-]+$")


def make_run_id(scenario: str, label: str = "", now: datetime | None = None) -> str:
    """`<UTC yyyymmddThhmmssZ>-<scenario>[-<label>]`, safe as a folder name."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return "-".join([stamp, _slug(scenario), *([_slug(label)] if label else [])])


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.]+", "_", text).strip("_") or "run"


class _Entry:
    """An entry of the run folder, read as an attribute: RunFolder(root).report is root/report.html."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, folder: RunFolder, owner: type[RunFolder]) -> Path:
        return folder.root / self.name


@dataclass(frozen=True)
class RunFolder:
    """Paths inside one run folder. Construct with the folder; nothing is created until asked."""

    root: Path
    manifest = _Entry("manifest.json")
    requests = _Entry("requests.parquet")
    # Incremental Arrow stream parts, one file per writer; compacted into requests.parquet at the end.
    requests_parts = _Entry("requests.parts")
    telemetry = _Entry("telemetry.parquet")
    telemetry_parts = _Entry("telemetry.parts")
    collectors_status = _Entry("collectors.json")  # by `python -m collectors`; merged into the manifest
    # By the collectors' agent pulls (clock offsets, missing seconds); merged into the manifest.
    agents_status = _Entry("agents.json")
    precision = _Entry("precision.json")  # a precision check of the configuration the run measured
    locust = _Entry("locust")
    analysis = _Entry("analysis")
    report = _Entry("report.html")

    @property
    def run_id(self) -> str:
        return self.root.name

    def create(self) -> RunFolder:
        self.root.mkdir(parents=True, exist_ok=True)
        return self


def new_run_folder(runs_dir: Path, scenario: str, label: str = "") -> RunFolder:
    """A fresh, uniquely named folder under runs_dir (a suffix is added if the second is taken). Its path is
    absolute: the run's child processes (collectors, workers) start in other directories, and every file of
    the run must land in this one folder whatever directory the run started from."""
    runs_dir = runs_dir.resolve()
    base = make_run_id(scenario, label)
    root = runs_dir / base
    n = 1
    while root.exists():
        n += 1
        root = runs_dir / f"{base}-{n}"
    return RunFolder(root).create()


def open_run_folder(path: str | os.PathLike[str]) -> RunFolder:
    """A run folder that must already exist and hold a manifest."""
    folder = RunFolder(Path(path))
    if not folder.root.is_dir():
        raise RunFolderError(f"{folder.root} is not a directory; pass a run folder such as runs/<run_id>")
    if not folder.manifest.is_file():
        raise RunFolderError(f"{folder.root} has no manifest.json; it is not a run folder (or the run never started)")
    return folder


def latest_run_folder(runs_dir: Path) -> RunFolder:
    """The newest run folder under runs_dir (by name, which starts with the UTC start time)."""
    candidates = sorted(p for p in runs_dir.glob("*") if (p / "manifest.json").is_file())
    if not candidates:
        raise RunFolderError(f"no run folders under {runs_dir}; run `make bench` or a locustfile first")
    return RunFolder(candidates[-1])


def resolve_run_folder(run_dir: Path | None, latest: bool, runs_dir: Path) -> RunFolder:
    """RUN_DIR, or the newest run under runs_dir with --latest (the choice every per-run command offers)."""
    if latest:
        return latest_run_folder(runs_dir)
    if run_dir is None:
        raise RunFolderError("pass a run folder (RUN_DIR) or --latest [--runs-dir DIR]")
    return open_run_folder(run_dir)


# Manifest I/O
def write_manifest(folder: RunFolder, manifest: Manifest) -> None:
    write_atomically(folder.manifest, manifest.model_dump_json(indent=2))


def read_manifest(folder: RunFolder) -> Manifest:
    try:
        raw = json.loads(folder.manifest.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise RunFolderError(f"{folder.manifest} is missing") from exc
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{folder.manifest} is not valid JSON: {exc}") from exc
    version = raw.get("schema_version")
    if version is None or int(version) > SCHEMA_VERSION:
        raise RunFolderError(
            f"{folder.manifest} has schema_version {version!r}; this embedperf reads up to "
            f"{SCHEMA_VERSION}. Upgrade embedperf to read it."
        )
    return Manifest.model_validate(raw)


def _read_table(parquet: Path, parts_dir: Path, schema: pa.Schema, columns: Iterable[str] | None) -> pa.Table:
    tables = []
    if parquet.is_file():
        tables.append(pq.read_table(parquet, schema=schema))
    if parts_dir.is_dir():
        tables.append(read_parts(parts_dir, schema))
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    return table.select(list(columns)) if columns is not None else table


def read_requests_table(folder: RunFolder, columns: Iterable[str] | None = None) -> pa.Table:
    """All request rows in memory (small runs, tests): the Parquet plus parts left by an interrupted run."""
    return _read_table(folder.requests, folder.requests_parts, REQUEST_SCHEMA, columns)


def read_telemetry_table(folder: RunFolder, columns: Iterable[str] | None = None) -> pa.Table:
    return _read_table(folder.telemetry, folder.telemetry_parts, TELEMETRY_SCHEMA, columns)


def write_requests_parquet(folder: RunFolder, table: pa.Table) -> None:
    """Write a complete requests table directly (synthetic runs, tests)."""
    pq.write_table(table.cast(REQUEST_SCHEMA), folder.requests, compression="zstd")


def write_telemetry_parquet(folder: RunFolder, table: pa.Table) -> None:
    pq.write_table(table.cast(TELEMETRY_SCHEMA), folder.telemetry, compression="zstd")
