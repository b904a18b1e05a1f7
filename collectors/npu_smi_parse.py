"""Parsers for `npu-smi` text output: key/value reports, `-l`, `-m`, the box table and `watch` rows.

Everything here is pure text -> plain data, so every shape seen in the wild has a golden test.
Values stay strings; `npu_smi_map` turns them into canonical metrics (and drops `NA` / `-`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

NO_VALUE = frozenset({"NA", "-", "N/A", ""})
ERROR_MARKERS = ("Invalid card id", "Error parameter", "does not exist", "not support")

_KV_RE = re.compile(r"^\s*(?P<key>\S.*?)?\s+:(?:\s*(?P<value>.*?))?\s*$")
_PROC_RE = re.compile(r"Process id:\s*(\d+)\s+Process name:\s*(.*?)\s+Process memory\(MB\):\s*(\d+)")
_PAIR_RE = re.compile(r"(\d+)\s*/\s*(\d+)")
# Watch header cells all end in a unit in parentheses; neighbours may touch with one space.
_HEADER_CELL_RE = re.compile(r"[^()]+\([^)]*\)")


def find_error(text: str) -> str | None:
    """The first error line npu-smi printed (it may still exit 0), or None."""
    for line in text.splitlines():
        if any(marker in line for marker in ERROR_MARKERS):
            return line.strip()
    return None


def _int_or_none(value: str | None) -> int | None:
    try:
        return None if value is None else int(value.strip())
    except ValueError:
        return None


# ---- Key/value reports: `npu-smi info -t usages|power|temp|memory|common|board|health -i N [-c C]`
@dataclass
class KvReport:
    """One key/value report. `card` holds fields outside any chip block (single-die outputs)."""

    npu_id: int | None = None
    chip_count: int | None = None
    card: dict[str, str] = field(default_factory=dict)
    chips: dict[int, dict[str, str]] = field(default_factory=dict)
    mcu: dict[str, str] = field(default_factory=dict)
    processes: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


def _kv_lines(text: str) -> list[list[tuple[str, str]]]:
    """Blocks (split on blank lines) of (key, value); lines that are not `key : value` are dropped."""
    blocks: list[list[tuple[str, str]]] = [[]]
    for raw in text.splitlines():
        if not raw.strip():
            if blocks[-1]:
                blocks.append([])
            continue
        if _PROC_RE.search(raw):
            blocks[-1].append(("\0proc", raw))
            continue
        if (match := _KV_RE.match(raw)) is None:
            continue
        key = " ".join((match.group("key") or "").split())  # whitespace normalised, as KV_FIELDS spells keys
        blocks[-1].append((key, (match.group("value") or "").strip()))
    return [b for b in blocks if b]


def parse_kv(text: str) -> KvReport:
    """Parse a key/value report. `Chip ID` may come before or after its chip's fields."""
    report = KvReport(error=find_error(text))
    last: tuple[dict[str, str], str] | None = None
    for block in _kv_lines(text):
        fields: dict[str, str] = {}
        chip_id: int | None = None
        for key, value in block:
            if key == "\0proc":
                m = _PROC_RE.search(value)
                assert m is not None
                report.processes.append({"pid": int(m.group(1)), "name": m.group(2), "mem_mb": int(m.group(3))})
            elif key == "":
                if last is not None:  # continuation of the previous key (health details)
                    target, last_key = last
                    target[last_key] = f"{target[last_key]}\n{value}" if target[last_key] else value
            elif key == "NPU ID":
                report.npu_id = _int_or_none(value)
            elif key == "Chip Count":
                report.chip_count = _int_or_none(value)
            elif key == "Total Count":
                continue
            elif key == "Chip ID":
                chip_id = _int_or_none(value)
            else:
                fields[key] = value
                last = (fields, key)
        if fields.get("Chip Name", "").lower() == "mcu":
            fields.pop("Chip Name")
            target = report.mcu
        elif chip_id is not None:
            target = report.chips.setdefault(chip_id, {})
        else:
            target = report.card
        target.update(fields)
        if last is not None and last[0] is fields:
            last = (target, last[1])
    return report


# ---- `npu-smi info -l`: the cards on this host
def parse_list(text: str) -> list[dict[str, Any]]:
    """Cards as `{"npu_id", "chip_count", "fields"}` in the order printed (IDs are not contiguous)."""
    cards: list[dict[str, Any]] = []
    for block in _kv_lines(text):
        for key, value in block:
            if key == "NPU ID":
                cards.append({"npu_id": _int_or_none(value), "chip_count": None, "fields": {}})
            elif not cards or key in ("Total Count", "", "\0proc"):
                continue
            elif key == "Chip Count":
                cards[-1]["chip_count"] = _int_or_none(value)
            else:
                cards[-1]["fields"][key] = value
    return [c for c in cards if c["npu_id"] is not None]


# ---- `npu-smi info -m`: NPU ID / Chip ID / Chip Logic ID / Chip Name table
def parse_mapping(text: str) -> list[dict[str, str]]:
    """Rows of the mapping table keyed by its own header names (columns differ by driver)."""
    header: list[str] | None = None
    rows: list[dict[str, str]] = []
    for raw in text.splitlines():
        if not (line := raw.replace("\t", "  ").strip()):
            continue
        cells = re.split(r"\s{2,}", line)
        if header is None:
            if cells and cells[0] == "NPU ID":
                header = cells
            continue
        if len(cells) == len(header):
            rows.append(dict(zip(header, cells, strict=True)))
    return rows


def chips_from_mapping(rows: list[dict[str, str]]) -> list[tuple[int, int]]:
    """(npu_id, chip_id) of compute chips; the board MCU row (logic ID `-`, name Mcu) is not one."""
    chips = []
    for row in rows:
        if row.get("Chip Name", "").lower() == "mcu" or row.get("Chip Logic ID") in NO_VALUE - {""}:
            continue
        npu, chip = _int_or_none(row.get("NPU ID")), _int_or_none(row.get("Chip ID"))
        if npu is not None and chip is not None:
            chips.append((npu, chip))
    return chips


# ---- `npu-smi info`: the box table, two rows per chip
def _numbers(cell: str) -> list[str]:
    """Tokens of a value cell with `a / b` pairs kept together as `a/b`."""
    return _PAIR_RE.sub(r"\1/\2", cell).split()


def _pair(token: str | None) -> tuple[int, int] | None:
    m = _PAIR_RE.fullmatch(token or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def parse_info_table(text: str) -> list[dict[str, Any]]:
    """One dict per chip from the box table of `npu-smi info` (process table ignored)."""
    rows: list[list[str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("+") and rows and "Process" in " ".join(rows[-1]):
            break
        if line.startswith("|") and not line.startswith("| npu-smi"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
    util_kind = "npu_util" if any("NPU Util" in " ".join(r) for r in rows) else "aicore"
    data = [r for r in rows if not any(h in " ".join(r) for h in ("Name", "Bus-Id", "Process", "NPU ID"))]
    chips: list[dict[str, Any]] = []
    for top, bottom in zip(data[0::2], data[1::2], strict=False):
        if top and top[0].startswith("No running"):
            break
        # 950 layout puts NPU ID and name in separate cells; older ones share the first cell.
        head = top[0].split()
        if len(top) == 4:
            npu_id, name, health = top[0], top[1], top[2]
            chip_cells = bottom[0].split() + bottom[1].split()
        else:
            npu_id, name, health = head[0], " ".join(head[1:]), top[1]
            chip_cells = bottom[0].split()
        top_vals, bottom_vals = _numbers(top[-1]), _numbers(bottom[-1])
        chips.append(
            {
                "npu_id": int(npu_id),
                "chip_id": int(chip_cells[0]) if chip_cells else 0,
                "name": name,
                "health": health,
                "bus_id": bottom[-2],
                "power_w": top_vals[0] if top_vals else None,
                "temp_c": top_vals[1] if len(top_vals) > 1 else None,
                "util_pct": bottom_vals[0] if bottom_vals else None,
                "util_kind": util_kind,
                "memory_mb": _pair(bottom_vals[1] if len(bottom_vals) > 1 else None),
                "hbm_mb": _pair(bottom_vals[2] if len(bottom_vals) > 2 else None),
            }
        )
    return chips


# ---- `npu-smi info watch`: a header once, then one fixed-width row per device per interval
class WatchParser:
    """Stateful line parser for `npu-smi info watch`: columns are found by header name."""

    def __init__(self) -> None:
        self.columns: list[str] | None = None

    def feed(self, line: str) -> dict[str, str] | None:
        """A row as {header: value}, or None for the header, blank lines and anything unparseable."""
        if not (stripped := line.strip()):
            return None
        if stripped.startswith("NpuID"):
            self.columns = [cell.strip() for cell in _HEADER_CELL_RE.findall(stripped)]
            return None
        values = stripped.split()
        if self.columns is None or len(values) != len(self.columns):
            return None

        return dict(zip(self.columns, values, strict=True))
