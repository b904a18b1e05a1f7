"""The user's own texts for `payload.dataset`: one reader per file type, each error saying what to fix.

Read when the scenario is loaded, so a missing file, a missing field or an empty dataset stops
the run before any load (and again by each payload sampler, which keeps the texts in memory).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from embedperf.errors import ConfigError
from scenarios.models import Dataset

SUFFIXES: tuple[str, ...] = (".jsonl", ".csv", ".parquet", ".txt")


def load_dataset(spec: Dataset) -> list[str]:
    """Every non-empty text of the dataset, in file order."""
    path = Path(spec.path).expanduser()
    if not path.is_file():
        raise ConfigError(f"payload.dataset.path {path} does not exist; give a .jsonl, .csv, .parquet or .txt file")
    suffix = path.suffix.lower()
    read = {".txt": _txt, ".jsonl": _jsonl, ".csv": _csv, ".parquet": _parquet}.get(suffix)
    if read is None:
        raise ConfigError(f"payload.dataset.path {path}: unknown file type {suffix!r}; valid: {', '.join(SUFFIXES)}")
    if not (texts := [t.strip() for t in read(path, spec.field) if t and t.strip()]):
        raise ConfigError(
            f"payload.dataset {path} holds no non-empty text; fill it or point payload.dataset.path elsewhere"
        )
    return texts


def _missing_field(path: Path, field: str, present: list[str]) -> ConfigError:
    return ConfigError(
        f"payload.dataset {path}: no field {field!r}; set payload.dataset.field to one of: "
        f"{', '.join(present) or '(none)'}"
    )


def _txt(path: Path, field: str) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()  # one text per line: no field


def _jsonl(path: Path, field: str) -> list[str]:
    texts: list[str] = []
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except ValueError as exc:
                raise ConfigError(f"payload.dataset {path}:{line_no}: not a JSON object ({exc})") from None
            if not isinstance(doc, dict) or field not in doc:
                raise _missing_field(path, field, sorted(doc) if isinstance(doc, dict) else [])
            texts.append(str(doc[field]))
    return texts


def _csv(path: Path, field: str) -> list[str]:
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        if field not in (reader.fieldnames or []):
            raise _missing_field(path, field, list(reader.fieldnames or []))
        return [row[field] for row in reader]


def _parquet(path: Path, field: str) -> list[str]:
    import pyarrow.parquet as pq  # pyarrow loads only for a Parquet dataset; scenario loading stays light

    names = pq.read_schema(path).names
    if field not in names:
        raise _missing_field(path, field, names)
    column = pq.read_table(path, columns=[field]).column(field)
    return [str(v) for v in column.to_pylist() if v is not None]
