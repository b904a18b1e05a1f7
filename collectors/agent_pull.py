"""Pull an `embedperf agent`'s samples into the run: exactly the run's window, on the generator's clock.

Clocks differ between hosts. The offset to the agent is estimated at the start and at the end like
NTP (the agent's time against the midpoint of our request and its answer, best of a few probes),
samples are shifted onto the generator's clock, and offset and uncertainty go to the manifest. An
agent that is down does not stop the run: the pull retries, the outage is an event, and the
seconds without samples are listed. The token comes from `--agent-token-file` or EMBEDPERF_AGENT_TOKEN
(collectors.agent_token); an agent that refuses it (401) is named as such, never as "down".
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from collectors.agent_token import TOKEN_ENV, bearer_headers, resolve_token
from collectors.base import Source
from collectors.config import CollectorConfig
from embedperf.files import write_atomically
from embedperf.schema import AgentRecord, RunFolder, TelemetrySample

PULL_INTERVAL_S = 2.0
PROBES = 5
REQUEST_TIMEOUT_S = 3.0
_RECORDS_LOCK = threading.Lock()


@dataclass(frozen=True)
class OffsetEstimate:
    """Agent clock minus our clock, and half the round trip of the probe it came from."""

    offset_s: float
    uncertainty_s: float
    host: str = ""


def estimate_offset(client: httpx.Client, url: str, probes: int = PROBES) -> OffsetEstimate | None:
    """Best (shortest round trip) of `probes` requests to /time; None when the agent does not answer."""
    best: OffsetEstimate | None = None
    for _ in range(probes):
        t0 = time.time()
        try:
            body = client.get(f"{url}/time").raise_for_status().json()
            agent_now = float(body["now_unix_s"])
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            continue
        t1 = time.time()
        estimate = OffsetEstimate(agent_now - (t0 + t1) / 2.0, (t1 - t0) / 2.0, str(body.get("host", "")))
        if best is None or estimate.uncertainty_s < best.uncertainty_s:
            best = estimate
    return best


def missing_seconds(agent_ticks: set[int], start_unix_s: float, end_unix_s: float, offset_s: float) -> list[int]:
    """Seconds of [start, end] (our clock) whose agent tick brought no sample. The agent samples on whole
    seconds of its own clock, so a sample is matched to its tick (round on the agent's clock) and reported as
    the second it falls in on ours."""
    first, last = math.ceil(start_unix_s + offset_s), math.floor(end_unix_s + offset_s)
    return [math.floor(tick - offset_s) for tick in range(first, last + 1) if tick not in agent_ticks]


def seconds_ranges(seconds: list[int]) -> str:
    """[10, 11, 12, 20] -> '10-12, 20' (for an event message)."""
    parts: list[str] = []
    for s in seconds:
        if parts and s == int(parts[-1].split("-")[-1]) + 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{s}"
        else:
            parts.append(str(s))
    return ", ".join(parts)


class AgentSource(Source):
    """One agent. Pulls every PULL_INTERVAL_S into a spool file in the run folder (memory stays flat on
    long runs; the agent buffers too); rows come out at finish, once the end offset is known."""

    name = "agent"
    periodic = False

    def __init__(self, config: CollectorConfig, url: str) -> None:
        super().__init__()
        self.status.name = f"agent {url}"
        self.config = config
        self.url = url.rstrip("/")
        headers = bearer_headers(resolve_token(config.agent_token_file))
        self.client = httpx.Client(timeout=REQUEST_TIMEOUT_S, headers=headers)
        self.refused: str | None = None  # why the agent refused our token (401), once it has
        self.host = ""
        self.spool = spool_path(RunFolder(config.out_dir), self.url)
        self.since_unix_s = 0.0
        self.start_offset: OffsetEstimate | None = None
        self.down = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.start_offset = estimate_offset(self.client, self.url)
        if self.start_offset is None:
            if self._answers_401():
                self._refused()
            else:
                self.status.event("gap", f"agent {self.url} does not answer at the start; retrying")
            self.down = True
            self.since_unix_s = time.time() - 60.0  # its clock is unknown yet: ask for a wide margin
        else:
            self.host = self.start_offset.host
            self.since_unix_s = time.time() + self.start_offset.offset_s - self.config.interval_s
            self._pull()
        self._thread = threading.Thread(target=self._loop, name=f"agent-pull-{self.url}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(PULL_INTERVAL_S):
            self._pull()

    def _pull(self) -> None:
        try:
            resp = self.client.get(f"{self.url}/samples", params={"since": repr(self.since_unix_s)})
            if resp.status_code == 401:
                self._refused()
                return
            resp.raise_for_status()
            body = resp.json()
        except (httpx.HTTPError, ValueError) as exc:
            if not self.down:
                self.status.event("gap", f"agent {self.url} unreachable: {exc}")
                self.down = True
            return
        if self.down:
            self.status.event("recovered", f"agent {self.url} answers again")
            self.down = False
        self.host = str(body.get("host") or self.host)
        samples = body.get("samples") or []
        if samples:  # on the agent's clock: shifted at finish, once the offset is known
            with self.spool.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(samples) + "\n")
            self.since_unix_s = max(self.since_unix_s, max(float(row[0]) for row in samples))

    def _answers_401(self) -> bool:
        try:
            return self.client.get(f"{self.url}/time").status_code == 401
        except httpx.HTTPError:
            return False

    def _refused(self) -> None:
        """Record once that the agent refuses our token: a wrong secret, not an outage."""
        if self.refused is None:
            self.refused = refused_message(self.url)
            self.status.event("error", self.refused)

    def _spooled(self) -> Iterator[tuple[float, str, str, str, float]]:
        if not self.spool.is_file():
            return
        with self.spool.open(encoding="utf-8") as fh:
            for line in fh:
                for ts, source, device, metric, value in json.loads(line):
                    yield float(ts), str(source), str(device), str(metric), float(value)

    def finish(self, start_unix_s: float, end_unix_s: float) -> Iterator[TelemetrySample]:
        """The run window's samples on our clock (streamed from the spool), then the agent's record."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=REQUEST_TIMEOUT_S * 2)
        end_offset = estimate_offset(self.client, self.url)
        self._pull()
        offsets = [o for o in (self.start_offset, end_offset) if o is not None]
        record = AgentRecord(url=self.url, host=self.host, offset_s=None, offset_uncertainty_s=None)
        if not offsets:
            record.status, record.reason = "failed", self.refused or f"agent {self.url} never answered"
            record.missing_s = missing_seconds(set(), start_unix_s, end_unix_s, 0.0)
            self._save(record)
            self.status.set("failed", record.reason)
            return
        record.offset_s = offset_s = sum(o.offset_s for o in offsets) / len(offsets)
        drift_s = abs(offsets[0].offset_s - offsets[-1].offset_s) / 2.0
        record.offset_uncertainty_s = max(o.uncertainty_s for o in offsets) + drift_s
        ticks: set[int] = set()
        for ts, source, device, metric, value in self._spooled():
            if start_unix_s <= ts - offset_s <= end_unix_s:
                ticks.add(round(ts))
                record.samples += 1
                yield TelemetrySample(ts - offset_s, self.host or self.url, source, device, metric, value)
        record.missing_s = missing_seconds(ticks, start_unix_s, end_unix_s, offset_s)
        if record.missing_s:
            record.status = "partial"
            record.reason = f"{len(record.missing_s)} s without samples: {seconds_ranges(record.missing_s)}"
            self.status.event("gap", record.reason)
        self._save(record)

    def _save(self, record: AgentRecord) -> None:
        """agents.json: one record per agent, merged (several agents finish in parallel threads)."""
        path = RunFolder(self.config.out_dir).agents_status
        with _RECORDS_LOCK:
            records = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
            records = [r for r in records if r.get("url") != record.url] + [record.model_dump()]
            write_atomically(path, json.dumps(records, indent=2))

    def close(self) -> None:
        self._stop.set()
        self.client.close()
        self.spool.unlink(missing_ok=True)


def refused_message(url: str) -> str:
    return (
        f"agent {url} refused the token (401): give the run the agent's token in {TOKEN_ENV} "
        "or --agent-token-file PATH"
    )


def check_agent(url: str, token: str | None, timeout_s: float = REQUEST_TIMEOUT_S) -> str | None:
    """Why a run could not pull from the agent at `url` with `token` (None when /time answers): the
    pre-flight check, so a refused token stops a run before any load, not leaves it without device figures."""
    try:
        resp = httpx.get(f"{url.rstrip('/')}/time", headers=bearer_headers(token), timeout=timeout_s)
    except httpx.HTTPError as exc:
        return f"agent {url} does not answer ({exc}); start `embedperf agent` there or drop --agent"
    if resp.status_code == 401:
        return refused_message(url)
    if resp.status_code != 200:
        return f"agent {url} answered /time with HTTP {resp.status_code}; is it an `embedperf agent`?"
    return None


def spool_path(folder: RunFolder, url: str) -> Path:
    """Where a run keeps an agent's pulled samples until the run ends (`agent-<host_port>.spool.jsonl`)."""
    slug = re.sub(r"[^A-Za-z0-9]+", "_", url.rstrip("/").split("://", 1)[-1]).strip("_")
    return folder.root / f"agent-{slug}.spool.jsonl"
