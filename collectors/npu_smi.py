"""npu-smi source (Ascend): one long-running `npu-smi info watch` per host, plus slow polls for what it lacks.

Watch mode reads the stream line by line (under `stdbuf -oL` when present) and keeps each device's
latest row; every tick emits rows that arrived since the previous one. A silent stream is killed
after `npu_timeout_s` and restarted with back-off (a `gap` event). HBM MB and vector utilisation,
which watch does not print, are polled every `npu_memory_poll_s`. Poll mode (`-t usages|power|temp`
per device every tick) is the fallback for drivers without watch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from collectors import npu_smi_map as nmap
from collectors import npu_smi_parse as nparse
from collectors.base import EventKind, Reading, Source
from collectors.config import CollectorConfig
from embedperf.errors import CollectorError

BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 30.0
STABLE_RUN_S = 30.0  # a stream that ran this long resets the back-off
LOST_AFTER_TICKS = 3  # a device silent for this many ticks while others report is lost
LOST_RETRY_S = 30.0  # poll mode: how often to retry a lost device
SLOW_METRICS = frozenset({"mem_used_mb", "mem_total_mb", "vector_util_pct"})
POLL_TYPES = ("usages", "power", "temp")


def resolve_executable(name: str) -> str | None:
    if os.sep in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return shutil.which(name)


class NpuSmi:
    """Runs npu-smi commands with a timeout; a hung command is killed, never waited on forever."""

    def __init__(self, executable: str, timeout_s: float) -> None:
        self.executable = executable
        self.timeout_s = timeout_s

    def run(self, *args: str) -> str:
        """Stdout+stderr of `npu-smi info ARGS`; raises CollectorError on timeout or a non-zero exit."""
        command = f"`npu-smi info {' '.join(args)}`"
        try:
            argv = [self.executable, "info", *args]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            raise CollectorError(f"{command} hung for {self.timeout_s:.0f} s; killed") from exc
        except OSError as exc:
            raise CollectorError(f"cannot run {self.executable}: {exc}") from exc
        text = done.stdout + done.stderr
        if done.returncode != 0 and nparse.find_error(text) is None:
            raise CollectorError(f"{command} exited {done.returncode}: {text.strip()[:200]}")
        return text

    def watch_command(self) -> list[str]:
        stdbuf = shutil.which("stdbuf")
        return [*([stdbuf, "-oL"] if stdbuf else []), self.executable, "info", "watch"]


def enumerate_chips(smi: NpuSmi, only: tuple[int, ...] | None) -> list[tuple[int, int]]:
    """(npu_id, chip_id) of every compute chip (`-m`, else `-l` with chips 0..count-1)."""
    chips = nparse.chips_from_mapping(nparse.parse_mapping(smi.run("-m")))
    if not chips:
        chips = [
            (card["npu_id"], chip)
            for card in nparse.parse_list(smi.run("-l"))
            for chip in range(card["chip_count"] or 1)
        ]
    if only is not None:
        chips = [c for c in chips if c[0] in only]
    if not chips:
        wanted = f" among --npu-ids {','.join(map(str, only))}" if only else ""
        raise CollectorError(f"npu-smi lists no NPUs{wanted}; check `npu-smi info -l` and the driver")
    return sorted(chips)


class WatchStream:
    """One `npu-smi info watch` process, restarted with back-off; keeps each device's latest row."""

    def __init__(self, smi: NpuSmi, source: NpuSmiSource) -> None:
        self.smi = smi
        self.source = source
        self.latest: dict[str, tuple[float, nmap.Metrics]] = {}
        self.last_line_mono_s = time.monotonic()
        self.proc: subprocess.Popen[str] | None = None
        self.stop_event = threading.Event()
        self.gap_since_mono_s: float | None = None  # when the stream stopped delivering rows
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="npu-smi-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        backoff_s = BACKOFF_START_S
        while not self.stop_event.is_set():
            started = time.monotonic()
            reason = self._run_once()
            if self.stop_event.is_set():
                return
            if self.gap_since_mono_s is None:
                self.gap_since_mono_s = self.last_line_mono_s
            if time.monotonic() - started > STABLE_RUN_S:
                backoff_s = BACKOFF_START_S
            self.source.status.event("restart", f"npu-smi watch {reason}; restarting in {backoff_s:.0f} s")
            if self.stop_event.wait(backoff_s):
                return
            backoff_s = min(backoff_s * 2, BACKOFF_MAX_S)

    def _run_once(self) -> str:
        try:
            command = self.smi.watch_command()
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        except OSError as exc:
            return f"could not start: {exc}"
        with self._lock:
            self.proc = proc
            self.last_line_mono_s = time.monotonic()
        parser = nparse.WatchParser()
        assert proc.stdout is not None
        waiting_since = self.gap_since_mono_s
        for line in proc.stdout:
            now = time.monotonic()
            self.last_line_mono_s = now
            if (row := parser.feed(line)) is None:
                if error := nparse.find_error(line):
                    self.source.status.event("error", f"npu-smi watch: {error}")
                continue
            if (mapped := nmap.metrics_from_watch_row(row)) is not None:
                self.latest[mapped[0]] = (now, mapped[1])
                if waiting_since is not None:
                    self.source.status.event("recovered", f"npu-smi watch rows again after {now - waiting_since:.0f} s")
                    waiting_since = self.gap_since_mono_s = None
        rc = proc.wait()
        with self._lock:
            self.proc = None
        return f"exited with code {rc}"

    def kill_if_silent(self, timeout_s: float) -> None:
        """Kill the stream when it printed nothing for timeout_s (a hung npu-smi)."""
        with self._lock:
            silent_s = time.monotonic() - self.last_line_mono_s
            if self.proc is None or self.proc.poll() is not None or silent_s < timeout_s:
                return
            self.proc.kill()
        self.source.status.event("gap", f"npu-smi watch silent for {silent_s:.0f} s; killed")

    def stop(self) -> None:
        self.stop_event.set()
        with self._lock:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
        self._thread.join(5.0)


class NpuSmiSource(Source):
    name = "npu_smi"

    def __init__(self, config: CollectorConfig) -> None:
        super().__init__()
        self.config = config
        self.executable = resolve_executable(config.npu_smi)
        self.smi: NpuSmi | None = None
        self.chips: list[tuple[int, int]] = []
        self.watch: WatchStream | None = None
        self._emitted_mono: dict[str, float] = {}
        self._lost: dict[str, float] = {}  # device -> when it was found lost (monotonic)
        self._slow: dict[str, tuple[float, nmap.Metrics]] = {}
        self._slow_emitted: dict[str, float] = {}
        self._health: dict[str, str] = {}  # device -> npu-smi's Health column (OK, Warning, Alarm, ...)
        self._next_slow_mono_s = 0.0
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="npu-smi-poll")
        self._slow_thread: threading.Thread | None = None

    def probe(self) -> str | None:
        if self.executable is None:
            return (
                f"{self.config.npu_smi} not found on PATH; pass --npu-smi PATH (or set EMBEDPERF_NPU_SMI) "
                "or drop the npu_smi source"
            )
        return None

    @property
    def devices(self) -> list[str]:
        return [nmap.device_name(n, c) for n, c in self.chips]

    @property
    def npu_ids(self) -> list[int]:
        return sorted({n for n, _ in self.chips})

    def start(self) -> None:
        if self.executable is None:
            raise CollectorError(self.probe() or "npu-smi missing")
        self.smi = NpuSmi(self.executable, self.config.npu_timeout_s)
        self.chips = enumerate_chips(self.smi, self.config.npu_ids)
        self.status.event("info", f"sampling {', '.join(self.devices)} in {self.config.npu_mode} mode")
        if self.config.npu_mode == "watch":
            self.watch = WatchStream(self.smi, self)
            self.watch.start()

    # ---- polls ------------------------------------------------------------------------------
    def _poll_npu(self, npu_id: int, types: tuple[str, ...]) -> dict[str, nmap.Metrics] | None:
        """Metrics of one card from `-t TYPE -i N` calls; None when the card is gone."""
        assert self.smi is not None
        merged: dict[str, nmap.Metrics] = {}
        for kind in types:
            report = nparse.parse_kv(self.smi.run("-t", kind, "-i", str(npu_id)))
            if report.error:
                return None
            for device, metrics in nmap.metrics_from_kv(report, npu_id).items():
                merged.setdefault(device, {}).update(metrics)
        return merged

    def _poll_all(self, types: tuple[str, ...]) -> dict[str, nmap.Metrics]:
        """Every card's metrics, polled in parallel; a lost card is retried every LOST_RETRY_S only."""
        now = time.monotonic()
        lost = {n: [self._lost[d] for d in self._card_devices(n) if d in self._lost] for n in self.npu_ids}
        ids = [n for n, since in lost.items() if not since or now - min(since) > LOST_RETRY_S]
        futures = {n: self._pool.submit(self._poll_npu, n, types) for n in ids}
        out: dict[str, nmap.Metrics] = {}
        for npu_id, future in futures.items():
            try:
                result = future.result()
            except CollectorError as exc:
                self._mark_lost(npu_id, "gap", str(exc))
                continue
            if result is None:
                self._mark_lost(npu_id, "device_lost", "Invalid card id: the device disappeared")
                continue
            for device in self._card_devices(npu_id):
                self._back(device)
            out.update(result)
        return out

    def _card_devices(self, npu_id: int) -> list[str]:
        return [nmap.device_name(n, c) for n, c in self.chips if n == npu_id]

    def _mark_lost(self, npu_id: int, kind: EventKind, message: str) -> None:
        for device in self._card_devices(npu_id):
            if device not in self._lost:
                self.status.event(kind, message, device)
            self._lost[device] = time.monotonic()

    def _back(self, device: str) -> None:
        if self._lost.pop(device, None) is not None:
            self.status.event("device_back", "reporting again", device)

    def _slow_poll(self) -> None:
        """Exact HBM used/total from the `npu-smi info` table, vector utilisation from `-t usages`."""
        assert self.smi is not None
        try:
            chips = nparse.parse_info_table(self.smi.run())
        except CollectorError as exc:
            self.status.event("error", f"memory poll: {exc}")
            chips = []
        table = nmap.metrics_from_info_table(chips)
        self._health.update({nmap.device_name(c["npu_id"], c["chip_id"]): str(c["health"]) for c in chips})
        usages = self._poll_all(("usages",))
        now = time.monotonic()
        for device in self.devices:
            metrics = {k: v for k, v in usages.get(device, {}).items() if k in SLOW_METRICS}
            metrics.update({k: v for k, v in table.get(device, {}).items() if k in SLOW_METRICS})
            if metrics and device not in self._lost:
                self._slow[device] = (now, metrics)

    def device_health(self) -> dict[str, bool]:
        """Lost devices are unhealthy; the others as npu-smi's Health column (read by the slow poll) says."""
        health = dict(self._health)
        return {
            device: device not in self._lost and health[device].upper() == "OK"
            for device in self.devices
            if device in self._lost or device in health
        }

    # ---- ticks ------------------------------------------------------------------------------
    def sample(self, ts_unix_s: float) -> Iterable[Reading]:
        now = time.monotonic()
        if now >= self._next_slow_mono_s:
            self._next_slow_mono_s = now + self.config.npu_memory_poll_s
            if self._slow_thread is None or not self._slow_thread.is_alive():
                self._slow_thread = threading.Thread(target=self._slow_poll, name="npu-smi-slow", daemon=True)
                self._slow_thread.start()
        readings = _readings(self._poll_all(POLL_TYPES)) if self.watch is None else self._watch_readings(now)

        return readings + _readings(_newer(self._slow, self._slow_emitted))

    def _watch_readings(self, now: float) -> list[Reading]:
        assert self.watch is not None
        self.watch.kill_if_silent(self.config.npu_timeout_s)
        wanted = set(self.devices)
        fresh = {d: m for d, m in _newer(self.watch.latest, self._emitted_mono).items() if d in wanted}
        for device in fresh:
            self._back(device)
        stale_s = LOST_AFTER_TICKS * self.config.interval_s
        for device in wanted:
            seen = self._emitted_mono.get(device)
            if fresh and device not in self._lost and seen is not None and now - seen > stale_s:
                self._lost[device] = now
                self.status.event("device_lost", f"no watch rows for {now - seen:.0f} s while others report", device)
        return _readings(fresh)

    def close(self) -> None:
        if self.watch is not None:
            self.watch.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)


def _readings(per_device: dict[str, nmap.Metrics]) -> list[Reading]:
    return [(device, m, v) for device, metrics in per_device.items() for m, v in metrics.items()]


def _newer(latest: dict[str, tuple[float, nmap.Metrics]], emitted: dict[str, float]) -> dict[str, nmap.Metrics]:
    """Device -> metrics of the `latest` entries that arrived since last emitted (now emitted)."""
    fresh: dict[str, nmap.Metrics] = {}
    for device, (at, metrics) in list(latest.items()):
        if at > emitted.get(device, -1.0):
            emitted[device] = at
            fresh[device] = metrics
    return fresh
