#!/usr/bin/env python3
"""A fake `npu-smi` for tests and benchmarks: replays the real output formats, streams watch rows, fails on demand.

Controlled by environment variables (all optional):
  FAKE_NPU_IDS=4,5              NPU IDs present (not contiguous on purpose); FAKE_NPU_CHIPS=1 chips per card
  FAKE_NPU_WATCH_INTERVAL_S=1   watch row interval;  FAKE_NPU_WATCH_FORMAT=910|950 (950: no ChipId, NPU Util, Pwr NA)
  FAKE_NPU_STATE_DIR=DIR        keeps the first-start time and calls.log (one argv per line)
  FAKE_NPU_HANG_WATCH_AFTER_S=S the first watch goes silent (hangs) after S seconds
  FAKE_NPU_LOST_ID=N, FAKE_NPU_LOST_AFTER_S=S  card N disappears S seconds after the first call
                                (watch stops printing it; `-i N` prints `Invalid card id.` and exits 0)
  FAKE_NPU_BUSY_IDS=3,5         only these NPUs work: AI core 60 + 2 x ID %, 72 + ID C; others 1 %, 40 + ID C;
                                power 90 + ID + util/10 W (watch)
  FAKE_NPU_HEALTH=3=Alarm       the Health column of the `npu-smi info` table for these NPUs (comma list; others OK)
  FAKE_NPU_FAIL=1               every command prints an error and exits 1
  FAKE_NPU_HANG=1               every command hangs
Only the standard library: it must run anywhere.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

IDS = [int(v) for v in os.environ.get("FAKE_NPU_IDS", "0").split(",") if v.strip()]
CHIPS = int(os.environ.get("FAKE_NPU_CHIPS", "1"))
INTERVAL_S = float(os.environ.get("FAKE_NPU_WATCH_INTERVAL_S", "1"))
FORMAT = os.environ.get("FAKE_NPU_WATCH_FORMAT", "910")
STATE = Path(os.environ["FAKE_NPU_STATE_DIR"]) if os.environ.get("FAKE_NPU_STATE_DIR") else None
BUSY = (
    {int(v) for v in os.environ["FAKE_NPU_BUSY_IDS"].split(",") if v.strip()}
    if "FAKE_NPU_BUSY_IDS" in os.environ
    else None
)
BUSY_UTIL_BASE = 60  # a busy NPU reports 60 + 2 x its ID (%), an idle one IDLE_UTIL
IDLE_UTIL = 1


def first_start_s() -> float:
    if STATE is None:
        return time.time()
    STATE.mkdir(parents=True, exist_ok=True)
    marker = STATE / "first_start"
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        os.write(fd, repr(time.time()).encode())
        os.close(fd)
    except FileExistsError:
        pass
    return float(marker.read_text() or time.time())


def log_call(argv: list[str]) -> None:
    if STATE is not None:
        with open(STATE / "calls.log", "a", encoding="utf-8") as fh:
            fh.write(" ".join(argv) + "\n")


def present(npu_id: int, t0: float) -> bool:
    lost = os.environ.get("FAKE_NPU_LOST_ID")
    after = float(os.environ.get("FAKE_NPU_LOST_AFTER_S", "0"))
    return not (lost is not None and int(lost) == npu_id and time.time() - t0 >= after)


def util(npu_id: int, chip: int) -> int:
    if BUSY is not None:  # a host where only the serving NPUs work: steady, known figures
        return BUSY_UTIL_BASE + 2 * npu_id if npu_id in BUSY else IDLE_UTIL
    return (npu_id * 7 + chip * 3 + int(time.time())) % 100


def temp_c(npu_id: int) -> int:
    """A busy NPU runs warm (72 + ID C), between the default 85 C limit and a 70 C override."""
    return 72 + npu_id if BUSY is not None and npu_id in BUSY else 40 + npu_id


def health(npu_id: int) -> str:
    """The table's Health column: OK unless FAKE_NPU_HEALTH names this NPU (`3=Alarm,5=Warning`)."""
    pairs = (item.split("=", 1) for item in os.environ.get("FAKE_NPU_HEALTH", "").split(",") if "=" in item)
    return {int(npu): state for npu, state in pairs}.get(npu_id, "OK")


def kv(lines: list[tuple[str, object]]) -> str:
    return "".join(f"\t{k:<30} : {v}\n" if k else "\n" for k, v in lines)


def cmd_list() -> str:
    out: list[tuple[str, object]] = [("Total Count", len(IDS)), ("", "")]
    for npu in IDS:
        out += [("NPU ID", npu), ("Chip Count", CHIPS), ("", "")]
    return kv(out)


def cmd_mapping() -> str:
    lines = ["\t" + "".join(f"{h:<31}" for h in ("NPU ID", "Chip ID", "Chip Logic ID")) + "Chip Name"]
    for logic, npu in enumerate(IDS):
        for chip in range(CHIPS):
            lines.append(
                "\t" + "".join(f"{v:<31}" for v in (npu, chip, logic * CHIPS + chip)) + "Ascend 910B3"
            )
    return "\n".join(lines) + "\n"


def cmd_type(kind: str, npu: int) -> str:
    out: list[tuple[str, object]] = [("NPU ID", npu), ("Chip Count", CHIPS), ("", "")]
    for chip in range(CHIPS):
        u = util(npu, chip)
        if kind == "usages":
            out += [
                ("DDR Capacity(MB)", 0),
                ("DDR Usage Rate(%)", 0),
                ("HBM Capacity(MB)", 65536),
                ("HBM Usage Rate(%)", 25),
                ("Aicore Usage Rate(%)", u),
                ("Aivector Usage Rate(%)", u // 2),
                ("Aicpu Usage Rate(%)", 1),
                ("Ctrlcpu Usage Rate(%)", 3),
                ("HBM Bandwidth Usage Rate(%)", u // 3),
            ]
        elif kind == "power":
            out += [("NPU Real-time Power(W)", f"{90 + npu + u / 10:.1f}")]
        elif kind == "temp":
            out += [("NPU Temperature (C)", temp_c(npu))]
        out += [("Chip ID", chip), ("", "")]
    return kv(out)


def cmd_table(t0: float) -> str:
    bar = "+" + "-" * 27 + "+" + "-" * 15 + "+" + "-" * 52 + "+"
    eq = bar.replace("-", "=")
    lines = [
        bar,
        "| npu-smi 25.0.rc1.1" + " " * 80 + "|",
        bar,
        "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|",
        "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |",
        eq,
    ]
    for npu in IDS:
        if not present(npu, t0):
            continue
        for chip in range(CHIPS):
            used = 16000 + npu * 100 + chip
            lines.append(
                f"| {npu:<5} 910B3               | {health(npu):<13} | {90.0 + npu:<11.1f} {temp_c(npu):<17} 0    / 0             |"
            )
            lines.append(
                f"| {chip:<25} | 0000:C1:00.0  | {util(npu, chip):<11} 0    / 0          {used}/ 65536         |"
            )
            lines.append(eq)
    return "\n".join(lines) + "\n"


def watch(t0: float) -> None:
    if FORMAT == "950":
        header = [
            "NpuID(Idx)",
            "Pwr(W)",
            "Temp(C)",
            "AI Core(%)",
            "AI Cpu(%)",
            "Ctrl Cpu(%)",
            "Memory(%)",
            "Memory BW(%)",
            "NPU Util(%)",
            "AI Cube(%)",
        ]
    else:
        header = [
            "NpuID(Idx)",
            "ChipId(Idx)",
            "Pwr(W)",
            "Temp(C)",
            "AI Core(%)",
            "AI Cpu(%)",
            "Ctrl Cpu(%)",
            "Memory(%)",
            "Memory BW(%)",
        ]
    print("".join(f"{h:<12}" for h in header).rstrip(), flush=True)
    hang_after = os.environ.get("FAKE_NPU_HANG_WATCH_AFTER_S")
    first_watch = STATE is None or not (STATE / "watch_started").exists()
    if STATE is not None:
        (STATE / "watch_started").touch()
    started = time.monotonic()
    next_s = time.monotonic()
    while True:
        if hang_after is not None and first_watch and time.monotonic() - started >= float(hang_after):
            time.sleep(3600)
        for npu in IDS:
            if not present(npu, t0):
                continue
            for chip in range(CHIPS):
                u = util(npu, chip)
                if FORMAT == "950":
                    row = [npu, "NA", temp_c(npu), u, 1, 3, 25, u // 3, min(100, u + 5), 0]
                else:
                    row = [npu, chip, f"{90 + npu + u / 10:.1f}", temp_c(npu), u, 1, 3, 25, u // 3]
                sys.stdout.write("".join(f"{str(v):<12}" for v in row) + "\n")
        sys.stdout.flush()
        next_s += INTERVAL_S
        time.sleep(max(0.0, next_s - time.monotonic()))


def main(argv: list[str]) -> int:
    t0 = first_start_s()
    log_call(argv)
    if os.environ.get("FAKE_NPU_HANG"):
        time.sleep(3600)
    if os.environ.get("FAKE_NPU_FAIL"):
        print("dcmi module initialize failed. ret is -8005", file=sys.stderr)
        return 1
    args = argv[1:]
    if not args or args[0] != "info":
        print("Usage: npu-smi info <watch|proc|-h|-m|-l|-t type> [Options...]")
        return 1
    rest = args[1:]
    if not rest:
        sys.stdout.write(cmd_table(t0))
    elif rest[0] == "watch":
        watch(t0)
    elif rest[0] == "-l":
        sys.stdout.write(cmd_list())
    elif rest[0] == "-m":
        sys.stdout.write(cmd_mapping())
    elif rest[0] == "-t" and "-i" in rest:
        npu = int(rest[rest.index("-i") + 1])
        if npu not in IDS or not present(npu, t0):
            print(
                "Invalid card id.\nError parameter of -i\nUsage: npu-smi info <watch|proc|-h|-m|-l|-t type> [Options...]"
            )
            return 0  # the real tool exits 0 here too
        sys.stdout.write(cmd_type(rest[1], npu))
    else:
        print("Error parameter of -t")
        return 1
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main(sys.argv))
    except (BrokenPipeError, KeyboardInterrupt):
        raise SystemExit(0) from None
