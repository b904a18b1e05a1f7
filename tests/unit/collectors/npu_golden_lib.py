"""Which parser reads which npu-smi fixture, and the parsed result the golden files hold."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from collectors import npu_smi_map as nmap
from collectors import npu_smi_parse as nparse

GOLDEN_DIR = Path(__file__).parent / "golden_npu_smi"


def strip_source_line(text: str) -> tuple[str, str]:
    """(source line, output): fixtures start with a `# source:` line the real tool never prints."""
    first, _, rest = text.partition("\n")
    assert first.startswith("# source:"), "fixture must start with its # source: line"
    return first, rest


def load_fixture(path: Path) -> dict[str, Any]:
    source, text = strip_source_line(path.read_text(encoding="utf-8"))
    return as_json(parse_fixture(path.name, text, asked_npu_id(source)))


def kind_of(name: str) -> str:
    if "watch" in name:
        return "watch"
    if "_info_m_" in name or "mapping" in name:
        return "mapping"
    if "_list" in name or name.startswith("list_"):
        return "list"
    if "_info_" in name or name.endswith("_info.txt"):
        return "table"
    return "kv"


def asked_npu_id(source_line: str) -> int | None:
    """The `-i N` of the command in the fixture's source line (what the collector itself would know)."""
    match = re.search(r"-i (\d+)", source_line)
    return int(match.group(1)) if match else None


def parse_fixture(name: str, text: str, npu_id: int | None = None) -> dict[str, Any]:
    """JSON-ready result: the parser's structure and the canonical metrics derived from it."""
    kind = kind_of(name)
    if kind == "watch":
        parser = nparse.WatchParser()
        rows = [r for r in (parser.feed(line) for line in text.splitlines()) if r is not None]
        mapped = [nmap.metrics_from_watch_row(r) for r in rows]
        return {"kind": kind, "columns": parser.columns, "rows": rows, "metrics": mapped}
    if kind == "mapping":
        rows = nparse.parse_mapping(text)
        return {"kind": kind, "rows": rows, "chips": nparse.chips_from_mapping(rows)}
    if kind == "list":
        return {"kind": kind, "cards": nparse.parse_list(text)}
    if kind == "table":
        chips = nparse.parse_info_table(text)
        return {"kind": kind, "chips": chips, "metrics": nmap.metrics_from_info_table(chips)}
    report = nparse.parse_kv(text)
    return {"kind": kind, "report": dataclasses.asdict(report), "metrics": nmap.metrics_from_kv(report, npu_id)}


def as_json(value: Any) -> Any:
    """Round-trip through JSON so tuples/int keys compare the way the golden file stores them."""
    return json.loads(json.dumps(value, sort_keys=True))
